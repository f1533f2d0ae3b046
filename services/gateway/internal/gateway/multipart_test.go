package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
)

const testKubeconfig = "apiVersion: v1\nkind: Config\ncurrent-context: \"a<b>&c\"\n"

// part is one part of a test form; file parts carry a filename, as
// emcoctl's (resty's SetFileReader) do.
type part struct {
	name, filename, content string
}

// form encodes parts as multipart/form-data and returns the body and its
// Content-Type.
func form(t *testing.T, parts ...part) (*bytes.Buffer, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		var w io.Writer
		var err error
		if p.filename != "" {
			w, err = mw.CreateFormFile(p.name, p.filename)
		} else {
			w, err = mw.CreatePart(textproto.MIMEHeader{
				"Content-Disposition": {`form-data; name="` + p.name + `"`},
				"Content-Type":        {"application/json"},
			})
		}
		require.NoError(t, err)
		_, err = io.WriteString(w, p.content)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return &b, mw.FormDataContentType()
}

// handedOn is what the handler standing in for the route received.
type handedOn struct {
	called        bool
	method, path  string
	contentType   string
	contentLength int64
	body          string
}

// recordingNext stands in for the route: it records the request and
// answers 201 with "created", or what answer writes when set.
func recordingNext(t *testing.T, got *handedOn, answer func(http.ResponseWriter)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		*got = handedOn{called: true, method: r.Method, path: r.URL.Path, contentType: r.Header.Get("Content-Type"),
			contentLength: r.ContentLength, body: string(b)}
		if answer != nil {
			answer(w)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "created")
	})
}

// serveMultipart serves req as an admin's (secure puts the caller in
// the request's audit record).
func serveMultipart(t *testing.T, req *http.Request, answer func(http.ResponseWriter)) (*httptest.ResponseRecorder, handedOn) {
	t.Helper()
	return serveMultipartAs(t, pki.Identity{Subject: "adm", Role: pki.RoleAdmin}, req, answer)
}

func serveMultipartAs(t *testing.T, id pki.Identity, req *http.Request, answer func(http.ResponseWriter)) (*httptest.ResponseRecorder, handedOn) {
	t.Helper()
	var got handedOn
	rec := httptest.NewRecorder()
	req = req.WithContext(context.WithValue(req.Context(), auditKey{}, &audit{id: id}))
	multipartClusters(recordingNext(t, &got, answer)).ServeHTTP(rec, req)
	return rec, got
}

func TestMultipartClustersRewrites(t *testing.T) {
	t.Parallel()
	kc, err := json.Marshal(testKubeconfig)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		parts []part
		want  string
	}{{
		name: "emcoctl",
		parts: []part{
			{name: "metadata", content: `{"metadata":{"name":"c1","description":"edge one","userData1":"a","userData2":"b"}}`},
			{name: "file", filename: "filename", content: testKubeconfig},
		},
		want: `{"metadata":{"name":"c1","description":"edge one","userData1":"a","userData2":"b"},"spec":{"kubeconfig":` + string(kc) + `}}`,
	}, {
		name: "labels, file first, no filename",
		parts: []part{
			{name: "file", content: testKubeconfig},
			{name: "metadata", content: `{"metadata":{"name":"c1"},"spec":{"labels":["edge","sriov"]}}`},
		},
		want: `{"metadata":{"name":"c1"},"spec":{"kubeconfig":` + string(kc) + `,"labels":["edge","sriov"]}}`,
	}, {
		name: "null spec",
		parts: []part{
			{name: "metadata", content: `{"metadata":{"name":"c1"},"spec":null}`},
			{name: "file", filename: "kc", content: testKubeconfig},
		},
		want: `{"metadata":{"name":"c1"},"spec":{"kubeconfig":` + string(kc) + `}}`,
	}, {
		// Unknown keys go on: the route's decoder refuses them by name.
		name: "unknown keys handed on",
		parts: []part{
			{name: "metadata", content: `{"metadata":{"name":"c1","owner":"x"},"spec":{"gitOps":{}},"clusterLabel":"y"}`},
			{name: "file", filename: "kc", content: testKubeconfig},
		},
		want: `{"metadata":{"name":"c1","owner":"x"},"spec":{"gitOps":{},"kubeconfig":` + string(kc) + `},"clusterLabel":"y"}`,
	}, {
		name: "kubeconfig at the limit",
		parts: []part{
			{name: "metadata", content: `{"metadata":{"name":"c1"}}`},
			{name: "file", filename: "kc", content: strings.Repeat("k", MaxKubeconfigBytes)},
		},
		want: `{"metadata":{"name":"c1"},"spec":{"kubeconfig":"` + strings.Repeat("k", MaxKubeconfigBytes) + `"}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body, ct := form(t, tc.parts...)
			req := httptest.NewRequest("POST", "/v2/cluster-providers/edge/clusters", body)
			req.Header.Set("Content-Type", ct)
			rec, got := serveMultipart(t, req, nil)
			require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
			require.Equal(t, "created", rec.Body.String())
			require.True(t, got.called)
			require.Equal(t, "POST", got.method)
			require.Equal(t, "/v2/cluster-providers/edge/clusters", got.path)
			require.Equal(t, "application/json", got.contentType)
			require.Equal(t, int64(len(got.body)), got.contentLength)
			require.JSONEq(t, tc.want, got.body)
			// The kubeconfig goes on byte for byte (its fingerprint is of
			// exactly what was sent).
			var sent struct {
				Spec struct {
					Kubeconfig string `json:"kubeconfig"`
				} `json:"spec"`
			}
			require.NoError(t, json.Unmarshal([]byte(got.body), &sent))
			for _, p := range tc.parts {
				if p.name == "file" {
					require.Equal(t, p.content, sent.Spec.Kubeconfig)
				}
			}
		})
	}
}

func TestMultipartClustersRefuses(t *testing.T) {
	t.Parallel()
	meta := part{name: "metadata", content: `{"metadata":{"name":"c1"}}`}
	file := part{name: "file", filename: "kc", content: testKubeconfig}
	for _, tc := range []struct {
		name        string
		parts       []part
		body        string // instead of parts
		contentType string // instead of the form's
		field       string
		message     string
	}{
		{name: "no boundary", contentType: "multipart/form-data", parts: []part{meta, file}, field: "body", message: "boundary"},
		{name: "not multipart", contentType: "multipart/form-data; boundary=xyz", body: `{"metadata":{"name":"c1"}}`, field: "body", message: "no form parts"},
		{name: "truncated", contentType: "multipart/form-data; boundary=xyz",
			body: "--xyz\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{}", field: "body"},
		{name: "no metadata", parts: []part{file}, field: "metadata", message: "required"},
		{name: "no file", parts: []part{meta}, field: "file", message: "required"},
		{name: "no parts", parts: nil, field: "body", message: "no form parts"},
		{name: "metadata twice", parts: []part{meta, file, meta}, field: "metadata", message: "twice"},
		{name: "file twice", parts: []part{file, meta, file}, field: "file", message: "twice"},
		{name: "unknown part", parts: []part{meta, file, {name: "files", filename: "x", content: "y"}}, field: "files", message: "unknown part"},
		{name: "metadata not JSON", parts: []part{{name: "metadata", content: `name: c1`}, file}, field: "metadata", message: "JSON object"},
		{name: "metadata two values", parts: []part{{name: "metadata", content: `{"metadata":{"name":"c1"}} {}`}, file}, field: "metadata"},
		{name: "metadata an array", parts: []part{{name: "metadata", content: `[{"metadata":{"name":"c1"}}]`}, file}, field: "metadata"},
		{name: "metadata null", parts: []part{{name: "metadata", content: `null`}, file}, field: "metadata"},
		{name: "metadata without metadata", parts: []part{{name: "metadata", content: `{"name":"c1"}`}, file}, field: "metadata", message: `no "metadata"`},
		{name: "spec not an object", parts: []part{{name: "metadata", content: `{"metadata":{"name":"c1"},"spec":["edge"]}`}, file}, field: "metadata.spec"},
		{name: "kubeconfig in metadata", parts: []part{{name: "metadata", content: `{"metadata":{"name":"c1"},"spec":{"kubeconfig":"x"}}`}, file},
			field: "metadata.spec.kubeconfig", message: `"file" part`},
		{name: "metadata too large", parts: []part{{name: "metadata", content: `{"metadata":{"name":"c1","description":"` + strings.Repeat("d", maxMetadataBytes) + `"}}`}, file},
			field: "metadata", message: "exceeds 65536 bytes"},
		{name: "kubeconfig too large", parts: []part{meta, {name: "file", filename: "kc", content: strings.Repeat("k", MaxKubeconfigBytes+1)}},
			field: "file", message: "exceeds 1048576 bytes"},
		{name: "kubeconfig empty", parts: []part{meta, {name: "file", filename: "kc"}}, field: "file", message: "empty"},
		{name: "kubeconfig not text", parts: []part{meta, {name: "file", filename: "kc", content: "\xff\xfe\x00k"}}, field: "file", message: "not text"},
		{name: "part without a name", parts: []part{meta, file, {name: "", content: "x"}}, field: "body", message: "without a form-data name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var body io.Reader
			var ct string
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			} else {
				body, ct = form(t, tc.parts...)
			}
			if tc.contentType != "" {
				ct = tc.contentType
			}
			req := httptest.NewRequest("POST", "/v2/cluster-providers/edge/clusters", body)
			req.Header.Set("Content-Type", ct)
			rec, got := serveMultipart(t, req, nil)
			require.False(t, got.called, "a refused form is not handed on")
			require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
			var e errs.Body
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
			require.Equal(t, tc.field, e.Field, e.Message)
			require.Equal(t, "InvalidArgument", e.Status)
			require.Contains(t, e.Message, tc.message)
			require.NotContains(t, rec.Body.String(), "Config", "the kubeconfig is never quoted")
		})
	}
}

// TestMultipartClustersPassesOthers: every other request reaches the
// route as it was sent.
func TestMultipartClustersPassesOthers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, method, path string
		multipart          bool
		contentType        string
	}{
		{name: "JSON registration", method: "POST", path: "/v2/cluster-providers/edge/clusters", contentType: "application/json"},
		{name: "no content type", method: "POST", path: "/v2/cluster-providers/edge/clusters"},
		{name: "multipart/mixed", method: "POST", path: "/v2/cluster-providers/edge/clusters", contentType: "multipart/mixed; boundary=x"},
		{name: "PUT of the list", method: "PUT", path: "/v2/cluster-providers/edge/clusters", multipart: true},
		{name: "POST of a cluster", method: "POST", path: "/v2/cluster-providers/edge/clusters/c1", multipart: true},
		{name: "PATCH of a cluster", method: "PATCH", path: "/v2/cluster-providers/edge/clusters/c1", multipart: true},
		{name: "PUT of a cluster's label", method: "PUT", path: "/v2/cluster-providers/edge/clusters/c1/labels", multipart: true},
		{name: "JSON update", method: "PUT", path: "/v2/cluster-providers/edge/clusters/c1", contentType: "application/json"},
		{name: "GET of the list", method: "GET", path: "/v2/cluster-providers/edge/clusters", multipart: true},
		{name: "two segments", method: "POST", path: "/v2/cluster-providers/edge/x/clusters", multipart: true},
		{name: "no provider", method: "POST", path: "/v2/cluster-providers//clusters", multipart: true},
		{name: "trailing slash", method: "POST", path: "/v2/cluster-providers/edge/clusters/", multipart: true},
		{name: "providers", method: "POST", path: "/v2/cluster-providers", multipart: true},
		{name: "projects", method: "POST", path: "/v2/projects", multipart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sent := `{"metadata":{"name":"c1"}}`
			ct := tc.contentType
			if tc.multipart {
				var b *bytes.Buffer
				b, ct = form(t, part{name: "metadata", content: sent}, part{name: "file", filename: "kc", content: testKubeconfig})
				sent = b.String()
			}
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(sent))
			if ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			rec, got := serveMultipart(t, req, nil)
			require.Equal(t, http.StatusCreated, rec.Code)
			require.True(t, got.called)
			require.Equal(t, tc.method, got.method)
			require.Equal(t, tc.path, got.path)
			require.Equal(t, ct, got.contentType)
			require.Equal(t, sent, got.body)
		})
	}
}

// TestMultipartClustersNamesFile: the route's errors about spec.kubeconfig
// name the file part; its other errors pass as they are.
func TestMultipartClustersNamesFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		field       string
		code        int
		wantField   string
		wantMessage string
	}{
		{name: "kubeconfig", field: "spec.kubeconfig", code: 400, wantField: "file", wantMessage: "file: is bad"},
		{name: "below the kubeconfig", field: "spec.kubeconfig.server", code: 400, wantField: "file.server", wantMessage: "file.server: is bad"},
		{name: "name", field: "metadata.name", code: 400, wantField: "metadata.name", wantMessage: "metadata.name: is bad"},
		{name: "look-alike", field: "spec.kubeconfigs", code: 400, wantField: "spec.kubeconfigs", wantMessage: "spec.kubeconfigs: is bad"},
		{name: "conflict", field: "", code: 409, wantField: "", wantMessage: "is bad"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body, ct := form(t, part{name: "metadata", content: `{"metadata":{"name":"c1"}}`}, part{name: "file", filename: "kc", content: testKubeconfig})
			req := httptest.NewRequest("POST", "/v2/cluster-providers/edge/clusters", body)
			req.Header.Set("Content-Type", ct)
			rec, got := serveMultipart(t, req, func(w http.ResponseWriter) {
				st := errs.ToStatus(errs.Invalid(tc.field, "is bad"))
				if tc.code == 409 {
					st = errs.ToStatus(errs.FailedPrecondition("is bad"))
				}
				errs.WriteHTTP(w, st)
			})
			require.True(t, got.called)
			require.Equal(t, tc.code, rec.Code)
			require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
			var e errs.Body
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
			require.Equal(t, tc.code, e.Code)
			require.Equal(t, tc.wantField, e.Field)
			require.Equal(t, tc.wantMessage, e.Message)
		})
	}
}

// TestMultipartClustersAuthorizes: only a caller the route serves has its
// form read; others get the route's 403, however bad the form, and no
// request goes on.
func TestMultipartClustersAuthorizes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		id   pki.Identity
		form bool
	}{
		{name: "project admin, good form", id: pki.Identity{Subject: "pa", Role: pki.RoleProjectAdmin, Project: "p1"}, form: true},
		{name: "project admin, bad form", id: pki.Identity{Subject: "pa", Role: pki.RoleProjectAdmin, Project: "p1"}},
		{name: "reader", id: pki.Identity{Subject: "r", Role: pki.RoleReader}, form: true},
		{name: "nobody", id: pki.Identity{}, form: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			parts := []part{{name: "metadata", content: `{"metadata":{"name":"c1"}}`}, {name: "file", filename: "kc", content: testKubeconfig}}
			if !tc.form {
				parts = parts[:1]
			}
			body, ct := form(t, parts...)
			req := httptest.NewRequest("POST", "/v2/cluster-providers/edge/clusters", body)
			req.Header.Set("Content-Type", ct)
			rec, got := serveMultipartAs(t, tc.id, req, nil)
			require.False(t, got.called)
			require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
		})
	}
}

// TestMultipartClusterUpdate: emcoctl's update, the same form as PUT
// .../clusters/{name}, goes on as UpdateCluster's JSON body; without a
// file part the stored kubeconfig is kept (no spec.kubeconfig), an empty
// one is refused, the route's kubeconfig errors name the file part, and only an admin's form is read.
func TestMultipartClusterUpdate(t *testing.T) {
	t.Parallel()
	kc, err := json.Marshal(testKubeconfig)
	require.NoError(t, err)
	const path = "/v2/cluster-providers/edge/clusters/c1"
	put := func(t *testing.T, parts ...part) *http.Request {
		body, ct := form(t, parts...)
		req := httptest.NewRequest("PUT", path, body)
		req.Header.Set("Content-Type", ct)
		return req
	}
	meta := part{name: "metadata", content: `{"metadata":{"name":"c1","description":"updated"},"spec":{"labels":["edge"]}}`}
	t.Run("with a kubeconfig", func(t *testing.T) {
		t.Parallel()
		rec, got := serveMultipart(t, put(t, meta, part{name: "file", filename: "filename", content: testKubeconfig}), nil)
		require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
		require.Equal(t, "PUT", got.method)
		require.Equal(t, path, got.path)
		require.Equal(t, "application/json", got.contentType)
		require.JSONEq(t, `{"metadata":{"name":"c1","description":"updated"},"spec":{"labels":["edge"],"kubeconfig":`+string(kc)+`}}`, got.body)
	})
	t.Run("without a file part", func(t *testing.T) {
		t.Parallel()
		rec, got := serveMultipart(t, put(t, meta), nil)
		require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
		require.JSONEq(t, `{"metadata":{"name":"c1","description":"updated"},"spec":{"labels":["edge"]}}`, got.body)
	})
	for name, tc := range map[string]struct {
		parts        []part
		field, words string
	}{
		"empty file":     {[]part{meta, {name: "file", filename: "kc"}}, "file", "empty"},
		"no metadata":    {[]part{{name: "file", filename: "kc", content: testKubeconfig}}, "metadata", "required"},
		"unknown part":   {[]part{meta, {name: "kubeconfig", content: "x"}}, "kubeconfig", "unknown part"},
		"kubeconfig key": {[]part{{name: "metadata", content: `{"metadata":{"name":"c1"},"spec":{"kubeconfig":""}}`}}, "metadata.spec.kubeconfig", `"file" part`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rec, got := serveMultipart(t, put(t, tc.parts...), nil)
			require.False(t, got.called)
			require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
			var e errs.Body
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
			require.Equal(t, tc.field, e.Field)
			require.Contains(t, e.Message, tc.words)
		})
	}
	t.Run("the route's kubeconfig error names the file", func(t *testing.T) {
		t.Parallel()
		rec, _ := serveMultipart(t, put(t, meta, part{name: "file", filename: "kc", content: testKubeconfig}), func(w http.ResponseWriter) {
			errs.WriteHTTP(w, errs.ToStatus(errs.Invalid("spec.kubeconfig", "is bad")))
		})
		require.Equal(t, http.StatusBadRequest, rec.Code)
		var e errs.Body
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), rec.Body.String())
		require.Equal(t, "file", e.Field)
		require.Equal(t, "file: is bad", e.Message)
	})
	t.Run("a project admin's form is not read", func(t *testing.T) {
		t.Parallel()
		rec, got := serveMultipartAs(t, pki.Identity{Subject: "pa", Role: pki.RoleProjectAdmin, Project: "p1"}, put(t, meta), nil)
		require.False(t, got.called)
		require.Equal(t, http.StatusForbidden, rec.Code, rec.Body.String())
	})
}
