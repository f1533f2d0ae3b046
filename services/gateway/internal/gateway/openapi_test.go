package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/gateway/internal/openapi"
)

// restBindings are every HTTP binding of the contracts the gateway mounts,
// "VERB path" with the path as the document spells it (variables by their
// JSON names), to the full RPC method they call.
func restBindings(t *testing.T) map[string]string {
	t.Helper()
	bindings, err := server.HTTPBindings()
	require.NoError(t, err)
	out := map[string]string{}
	variable := regexp.MustCompile(`\{([^}=]+)(=[^}]*)?\}`)
	for _, b := range bindings {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(strings.ReplaceAll(strings.TrimPrefix(b.RPC, "/"), "/", ".")))
		require.NoError(t, err, b.RPC)
		in := d.(protoreflect.MethodDescriptor).Input()
		path := variable.ReplaceAllStringFunc(b.Path, func(v string) string {
			name := variable.FindStringSubmatch(v)[1]
			fd := in.Fields().ByName(protoreflect.Name(name))
			require.NotNil(t, fd, "%s: %s is not a field of %s", b.RPC, name, in.FullName())
			return "{" + fd.JSONName() + "}"
		})
		key := strings.ToLower(b.Method) + " " + path
		require.NotContains(t, out, key, "two RPCs on %s", key)
		out[key] = b.RPC
	}
	return out
}

type docOp struct {
	OperationID string                     `json:"operationId"`
	Responses   map[string]json.RawMessage `json:"responses"`
}

// servedDoc is the document the gateway serves, as openapi.Build makes it.
func servedDoc(t *testing.T) (raw []byte, doc struct {
	Paths       map[string]map[string]docOp
	Responses   map[string]json.RawMessage
	Definitions map[string]struct {
		Properties map[string]json.RawMessage
		Required   []string
	}
}) {
	t.Helper()
	raw, err := openapi.Build(successStatus, "v1.2.3 test")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &doc))
	return raw, doc
}

// TestOpenAPIStatusCodes: the served document lists exactly the routes
// the contracts bind (by the protos' HTTP rules, not by the document's own
// names), each operation names its RPC, and its one success status is the
// status the gateway's setStatus writes for that RPC; every error response
// refers to a shared response that exists.
func TestOpenAPIStatusCodes(t *testing.T) {
	t.Parallel()
	bindings := restBindings(t)
	_, doc := servedDoc(t)
	seen := map[int]int{}
	documented := 0
	for path, ops := range doc.Paths {
		for verb, op := range ops {
			documented++
			full, ok := bindings[verb+" "+path]
			require.True(t, ok, "%s %s is documented but no RPC binds it", verb, path)
			rpc, err := openapi.RPC(op.OperationID)
			require.NoError(t, err)
			require.Equal(t, full[strings.LastIndex(full, "/")+1:], rpc, "%s %s: operationId %s", verb, path, op.OperationID)

			req := httptest.NewRequest(strings.ToUpper(verb), path, nil)
			ctx, err := runtime.AnnotateContext(context.Background(), runtime.NewServeMux(), req, full)
			require.NoError(t, err)
			w := httptest.NewRecorder()
			require.NoError(t, setStatus(ctx, w, nil))
			var success []int
			for code, resp := range op.Responses {
				c, err := strconv.Atoi(code)
				if err == nil && c < 300 {
					success = append(success, c)
					continue
				}
				var ref struct {
					Ref string `json:"$ref"`
				}
				require.NoError(t, json.Unmarshal(resp, &ref))
				name, ok := strings.CutPrefix(ref.Ref, "#/responses/")
				require.True(t, ok, "%s %s %s is a shared response", verb, path, code)
				require.Contains(t, doc.Responses, name, "%s %s %s", verb, path, code)
			}
			require.Equal(t, []int{w.Code}, success, "%s %s (%s): the documented success status is what setStatus writes", verb, path, full)
			seen[w.Code]++
		}
	}
	require.Len(t, bindings, documented, "every binding is documented")
	for _, c := range []int{200, 201, 202, 204} {
		require.Positive(t, seen[c], "some operation answers %d", c)
	}
}

// TestOpenAPIErrorBody: the document's Error is the body errs writes, with
// every key it may have, and required the keys it always has.
func TestOpenAPIErrorBody(t *testing.T) {
	t.Parallel()
	_, doc := servedDoc(t)
	def := doc.Definitions[openapi.ErrorDefinition]
	keys := func(err error) map[string]any {
		w := httptest.NewRecorder()
		errs.WriteHTTP(w, errs.ToStatus(err))
		var m map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m))
		return m
	}
	full := keys(errs.Invalid("metadata.name", "bad"))
	for k, v := range keys(errs.Because(errs.ReasonWrongState, "no")) {
		full[k] = v
	}
	for k := range full {
		require.Contains(t, def.Properties, k)
	}
	require.Len(t, def.Properties, len(full), "every property of Error is a key errs writes")
	bare := keys(errs.NotFound("none"))
	require.Len(t, def.Required, len(bare))
	for _, k := range def.Required {
		require.Contains(t, bare, k)
	}
	require.Contains(t, string(doc.Definitions[openapi.ErrorDefinition].Properties["reason"]), string(errs.ReasonWrongState))
}

// TestOpenAPIDocumentHead: title, version, security.
func TestOpenAPIDocumentHead(t *testing.T) {
	t.Parallel()
	raw, _ := servedDoc(t)
	var head struct {
		Info struct {
			Title, Version, Description string
		}
		SecurityDefinitions map[string]map[string]string
		Security            []map[string][]string
	}
	require.NoError(t, json.Unmarshal(raw, &head))
	require.Equal(t, openapi.Title, head.Info.Title)
	require.Equal(t, "v1.2.3 test", head.Info.Version)
	require.Contains(t, head.Info.Description, "docs/emco.md")
	require.Equal(t, map[string]string{"type": "apiKey", "in": "header", "name": "Authorization",
		"description": head.SecurityDefinitions[openapi.SecurityScheme]["description"]}, head.SecurityDefinitions[openapi.SecurityScheme])
	require.Contains(t, head.SecurityDefinitions[openapi.SecurityScheme]["description"], "Bearer")
	require.Contains(t, head.SecurityDefinitions[openapi.SecurityScheme]["description"], "mutual TLS")
	require.Equal(t, []map[string][]string{{openapi.SecurityScheme: {}}}, head.Security)
	require.Equal(t, NextPageTokenHeader, openapi.PageTokenHeader)
}

// TestPublicRoutes: the document and the page need no credential, and a
// bad one is not looked at (the gateway's failed-authentication limiter
// never counts it); everything else still does.
func TestPublicRoutes(t *testing.T) {
	t.Parallel()
	limiter := NewFailureLimiter(1, 1<<40)
	h, err := New(context.Background(), Conns{}, &Authenticator{AdminToken: "dcm-admin-x", Failures: limiter}, zap.NewNop(), Limits{})
	require.NoError(t, err)
	get := func(path, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for _, path := range []string{"/openapi.json", "/docs", "/docs/redoc.standalone.js"} {
		for _, token := range []string{"", "not-a-token"} {
			w := get(path, token)
			require.Equal(t, http.StatusOK, w.Code, "%s with %q", path, token)
		}
	}
	require.Zero(t, limiter.tracked(), "no failure counted")
	require.Equal(t, http.StatusUnauthorized, get("/docs/", "").Code, "nothing else is public")
	require.Equal(t, http.StatusTooManyRequests, get("/v2/projects", "").Code, "the address is limited now")
	require.Equal(t, http.StatusOK, get("/openapi.json", "").Code, "and still gets the document")
	require.Equal(t, http.StatusOK, get("/docs", "").Code)
	require.Equal(t, http.StatusNotFound, get("/docs/no-such.js", "").Code)
	require.Equal(t, http.StatusNotFound, get("/docs/index.html", "").Code)
}
