package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dcm-project/dcm/platform/errs"
)

// MaxKubeconfigBytes is the largest kubeconfig the multipart form's file
// part may hold. A kubeconfig with its credentials inline is a few KiB
// (tens with many contexts); rsync sets no bound of its own, so without
// this one only DCM_MAX_BODY_BYTES (4 MiB by default) would.
const MaxKubeconfigBytes = 1 << 20

// maxMetadataBytes is the largest metadata part: a name, a description,
// two user data strings and at most 64 labels fit in far less.
const maxMetadataBytes = 64 << 10

// The form's parts, as EMCO's cluster manager (clm) and emcoctl name them.
const (
	partMetadata = "metadata"
	partFile     = "file"
)

// multipartClusters reads EMCO's cluster registration, POST
// /v2/cluster-providers/{p}/clusters as multipart/form-data with a
// `metadata` part (EMCO's cluster body, JSON) and a `file` part (the
// kubeconfig, as text), and hands it on as the JSON body the route takes:
// the metadata part with the file as spec.kubeconfig. emcoctl's update
// sends the same form as PUT .../clusters/{name}: it is the cluster's
// update (UpdateCluster), and without a file part the stored kubeconfig
// is kept, as an empty spec.kubeconfig keeps it on the JSON route. A bad
// form is 400 naming the part; the route's own errors about the
// kubeconfig name the `file` part. Every other request passes as it is.
//
// Parts are streamed and each is read up to its limit, never further.
// The kubeconfig is a secret: it is neither logged nor quoted in an error.
func multipartClusters(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := clustersRoute
		if r.Method == http.MethodPut {
			route = clusterRoute
		}
		vars, ok := matchTemplate(route, r.URL.Path, false)
		if (r.Method != http.MethodPost && r.Method != http.MethodPut) || !ok {
			next.ServeHTTP(w, r)
			return
		}
		mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "multipart/form-data" {
			next.ServeHTTP(w, r)
			return
		}
		// The router authorizes on the route it matched; a form is read
		// only for a caller the route would serve, so a tenant gets the
		// 403 it gets for the JSON body, and no parsing.
		a := auditOf(r.Context())
		if !Authorize(a.id, r.Method, routeOf(route, vars)) {
			a.route = route
			forbid(w, a)
			return
		}
		body, err := clusterFromForm(r.Body, params["boundary"], r.Method == http.MethodPut)
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				w.Header().Set("Connection", "close")
				errs.WriteHTTPStatus(w, http.StatusRequestEntityTooLarge, status.New(codes.ResourceExhausted,
					fmt.Sprintf("request body exceeds %d bytes (DCM_MAX_BODY_BYTES)", tooLarge.Limit)))
				return
			}
			errs.WriteHTTP(w, errs.ToStatus(err))
			return
		}
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
		r2.GetBody = nil
		r2.Header.Set("Content-Type", "application/json")
		r2.Header.Del("Content-Length")
		pw := &partNamer{ResponseWriter: w}
		next.ServeHTTP(pw, r2)
		pw.finish()
	})
}

// clusterFromForm reads the form and returns the JSON body of
// CreateCluster (of UpdateCluster when update, where the file part may be
// left out), or an InvalidArgument naming the part.
func clusterFromForm(body io.Reader, boundary string, update bool) ([]byte, error) {
	if boundary == "" {
		return nil, errs.Invalid("body", "multipart/form-data without a boundary")
	}
	parts := map[string][]byte{}
	mr := multipart.NewReader(body, boundary)
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, formError(err)
		}
		name := p.FormName()
		limit := 0
		switch name {
		case partMetadata:
			limit = maxMetadataBytes
		case partFile:
			limit = MaxKubeconfigBytes
		case "":
			return nil, errs.Invalid("body", "a part without a form-data name: the form takes %q and %q", partMetadata, partFile)
		default:
			return nil, errs.Invalid(name, "unknown part: the form takes %q and %q", partMetadata, partFile)
		}
		if _, dup := parts[name]; dup {
			return nil, errs.Invalid(name, "is given twice")
		}
		b, err := io.ReadAll(io.LimitReader(p, int64(limit)+1))
		if err != nil {
			return nil, formError(err)
		}
		if len(b) > limit {
			what := "the kubeconfig"
			if name == partMetadata {
				what = "the metadata"
			}
			return nil, errs.Invalid(name, "%s exceeds %d bytes", what, limit)
		}
		parts[name] = b
	}
	if len(parts) == 0 {
		// An empty form, or a body without the boundary at all: the
		// reader tells them apart from neither.
		return nil, errs.Invalid("body", "no form parts: the form takes %q and %q", partMetadata, partFile)
	}
	meta, ok := parts[partMetadata]
	if !ok {
		return nil, errs.Invalid(partMetadata, `is required: the cluster as JSON, {"metadata":{"name":...}}`)
	}
	kc, ok := parts[partFile]
	switch {
	case !ok && update:
		// No kubeconfig: the stored one is kept.
	case !ok:
		return nil, errs.Invalid(partFile, "is required: the cluster's admin kubeconfig")
	case len(kc) == 0:
		return nil, errs.Invalid(partFile, "is empty: the cluster's admin kubeconfig is required")
	case !utf8.Valid(kc):
		return nil, errs.Invalid(partFile, "is not text: the kubeconfig is sent as it is (YAML or JSON), not encoded")
	}
	return clusterJSON(meta, string(kc))
}

// formError is a malformed form (or the body cap, passed on as it is).
func formError(err error) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return err
	}
	return errs.Invalid("body", "not a multipart/form-data body: %v", err)
}

// clusterJSON is the metadata part with the kubeconfig as
// spec.kubeconfig. Only the shape is checked here; every key goes on to
// the route's decoder, which refuses unknown ones as the JSON route does.
func clusterJSON(meta []byte, kubeconfig string) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := strictJSON(meta, &top); err != nil || top == nil {
		return nil, errs.Invalid(partMetadata, `is not a JSON object: the cluster as JSON, {"metadata":{"name":...}}`)
	}
	if _, ok := top["metadata"]; !ok {
		return nil, errs.Invalid(partMetadata, `has no "metadata": the cluster as JSON, {"metadata":{"name":...}}`)
	}
	spec := map[string]json.RawMessage{}
	if raw, ok := top["spec"]; ok && string(raw) != "null" {
		if err := strictJSON(raw, &spec); err != nil || spec == nil {
			return nil, errs.Invalid(partMetadata+".spec", `is not a JSON object: {"labels":[...]}`)
		}
	}
	if _, ok := spec["kubeconfig"]; ok {
		return nil, errs.Invalid(partMetadata+".spec.kubeconfig", "is not taken here: the kubeconfig is the %q part", partFile)
	}
	if kubeconfig == "" {
		// An update without a file part: the stored kubeconfig is kept.
		b, err := json.Marshal(top)
		if err != nil {
			return nil, fmt.Errorf("encode the cluster: %w", err)
		}
		return b, nil
	}
	kc, err := json.Marshal(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("encode the kubeconfig: %w", err)
	}
	spec["kubeconfig"] = kc
	if top["spec"], err = json.Marshal(spec); err != nil {
		return nil, fmt.Errorf("encode the spec: %w", err)
	}
	b, err := json.Marshal(top)
	if err != nil {
		return nil, fmt.Errorf("encode the cluster: %w", err)
	}
	return b, nil
}

// strictJSON decodes exactly one JSON value from b.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return errors.New("more than one JSON value")
	}
	return nil
}

// partNamer renames spec.kubeconfig to the file part in the route's error
// answers: a multipart client sent no spec.kubeconfig. Only error answers
// (small JSON bodies) are held back; others pass through as written.
type partNamer struct {
	http.ResponseWriter
	held *bytes.Buffer
	code int
}

func (w *partNamer) WriteHeader(code int) {
	if code >= http.StatusBadRequest && w.held == nil {
		w.held, w.code = &bytes.Buffer{}, code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *partNamer) Write(b []byte) (int, error) {
	if w.held != nil {
		return w.held.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *partNamer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes a held error answer, its field renamed.
func (w *partNamer) finish() {
	if w.held == nil {
		return
	}
	out := w.held.Bytes()
	var body errs.Body
	if json.Unmarshal(out, &body) == nil {
		const from = "spec.kubeconfig"
		if rest, ok := strings.CutPrefix(body.Field, from); ok && (rest == "" || rest[0] == '.') {
			body.Field = partFile + rest
			if m, ok := strings.CutPrefix(body.Message, from); ok {
				body.Message = partFile + m
			}
			if b, err := json.Marshal(body); err == nil {
				out = append(b, '\n')
			}
		}
	}
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(w.code)
	_, _ = w.ResponseWriter.Write(out)
}
