package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
)

// callGateway sends a request with a bearer token in a dialect and
// answers the status and the error body.
func callGateway(t *testing.T, h http.Handler, method, path, token, dialect, body string) (int, errs.Body) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(DialectHeader, dialect)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var b errs.Body
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &b), w.Body.String())
	return w.Code, b
}

// samplePaths are request paths under one of Elsewhere's patterns: each *
// a name, a last ** nothing, one segment and two.
func samplePaths(pattern string) []string {
	rest, deep := strings.CutSuffix(pattern, "/**")
	base := strings.ReplaceAll(rest, "*", "x1")
	if !deep {
		return []string{"/v2/" + base, "/v2/" + base + "/"}
	}
	return []string{"/v2/" + base, "/v2/" + base + "/n1", "/v2/" + base + "/n1/sub"}
}

// TestEMCOElsewhereAnswers: a request for each of EMCO's other
// controllers' resources in the table (EMCO's example files send them) is
// answered 501 with the table's message naming what DCM does instead, in
// both dialects and for every method; a URL outside the table still gets
// the router's "no route".
func TestEMCOElsewhereAnswers(t *testing.T) {
	t.Parallel()
	h := testGateway(t, zap.NewNop())
	call := func(method, path, dialect string) (int, errs.Body) {
		return callGateway(t, h, method, path, pki.AdminTokenPrefix+"x", dialect, `{"metadata":{"name":"n1"}}`)
	}
	for _, e := range Elsewhere {
		for _, path := range samplePaths(e.Pattern) {
			for _, method := range []string{"GET", "POST", "PUT", "DELETE"} {
				for _, dialect := range []string{DialectEMCO, DialectDCM} {
					code, b := call(method, path, dialect)
					require.Equal(t, http.StatusNotImplemented, code, "%s %s", method, path)
					require.Equal(t, "Unimplemented", b.Status)
					require.Equal(t, e.Message(), b.Message, "%s %s", method, path)
				}
			}
		}
	}
	for _, path := range []string{"/v2/composite-apps", "/v2/projects/p1/nothing", "/v2/cluster-providers/cp/clusters/c1/other",
		"/v2/controllers-x", "/v1/controllers"} {
		code, b := call("GET", path, DialectEMCO)
		require.Equal(t, http.StatusNotFound, code, path)
		require.True(t, strings.HasPrefix(b.Message, "no route for "), b.Message)
	}
	// The project's own routes are not shadowed.
	code, b := call("GET", "/v2/cluster-providers/cp/clusters/c1", DialectEMCO)
	require.NotEqual(t, http.StatusNotImplemented, code, b.Message)
}

// TestEMCOElsewhereMessages: each message names EMCO's resource and what
// DCM does instead.
func TestEMCOElsewhereMessages(t *testing.T) {
	t.Parallel()
	e, ok := elsewhere("/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/dig/intents")
	require.True(t, ok)
	require.Equal(t, "DCM does not serve EMCO's composite apps, apps, composite profiles and deployment intent groups (EMCO's orchestrator): "+
		"DCM has no composite apps: deploy workloads with the logical cloud's kubeconfig, GET /v2/projects/{project}/logical-clouds/{lc}/cluster-references/{name}/kubeconfig", e.Message())
	e, ok = elsewhere("/v2/controllers")
	require.True(t, ok)
	require.Contains(t, e.Message(), "DCM's resource synchronizer is built in")
	e, ok = elsewhere("/v2/projects/p1/composite-apps/ca/v1/deployment-intent-groups/dig/traffic-group-intents/t1/inbound-intents")
	require.True(t, ok)
	require.Contains(t, e.Message(), "traffic-intent-groups")
	for _, e := range Elsewhere {
		require.NotEmpty(t, e.What, e.Pattern)
		require.NotEmpty(t, e.Instead, e.Pattern)
		require.NotContains(t, e.What+e.Instead, "|", "the doc's table cell")
	}
}

// TestEMCOElsewhereDocumented: docs/emco.md lists the table as the code
// holds it (`make generate` writes it; services/gateway/cmd/emcodoc).
func TestEMCOElsewhereDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../../docs/emco.md")
	require.NoError(t, err)
	const begin = "services/gateway/cmd/emcodoc); do not edit -->\n"
	_, after, ok := strings.Cut(string(doc), begin)
	require.True(t, ok, "docs/emco.md has no generated list")
	listed, _, ok := strings.Cut(after, "<!-- END GENERATED -->")
	require.True(t, ok)
	require.Equal(t, ElsewhereDoc(), listed, "run make generate")
}
