package gateway

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
)

// aliasesOf are the seed's spellings of a traffic URL the contracts bind
// once (/v2/projects/.../traffic-intent-groups/...): /v2/project/ and
// /v2/projects/, traffic-intent-groups and traffic-intent-sets, and for an
// intent's URLs the intent-style .../intent/{group}/connectivity/....
// Written from API.md, not from aliases.go, to check it.
func aliasesOf(path string) []string {
	var out []string
	for _, prefix := range []string{"/v2/project/", "/v2/projects/"} {
		p := prefix + strings.TrimPrefix(path, "/v2/projects/")
		out = append(out, p, strings.Replace(p, "/traffic-intent-groups", "/traffic-intent-sets", 1))
		for from, to := range map[string]string{"interclusterservice": "intercluster", "intraclusterservice": "intracluster",
			"externaloutboundaccess": "external/outbound", "externalinboundaccess": "external/inbound", "dnsproviders": "dnsproviders"} {
			m := regexp.MustCompile(`/traffic-intent-groups/([^/]+)/` + from + `(/|$)`).FindStringSubmatchIndex(p)
			if m != nil {
				out = append(out, p[:m[0]]+"/intent/"+p[m[2]:m[3]]+"/connectivity/"+to+p[m[4]:])
			}
		}
	}
	return out
}

// variable is a URL template's {field}.
var variable = regexp.MustCompile(`\{[^}]*\}`)

// auditedGateway is a test gateway whose audit lines are observed, and
// the URLs the contracts bind.
func auditedGateway(t *testing.T) (http.Handler, *observer.ObservedLogs, []server.HTTPBinding) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	h := testGateway(t, zap.New(core))
	bs, err := server.HTTPBindings()
	require.NoError(t, err)
	return h, logs, bs
}

// TestTrafficAliasesReachTheirRPC: every spelling of every traffic URL
// the contracts bind (186 routes: the 170 of the traffic service and the
// 16 of core's traffic lifecycle, which were additional_bindings before)
// reaches the method of its one binding through the whole gateway, is
// authorized as that route (the project's admin passes and reaches the
// unreachable service: 503; another project's admin gets 403), and the
// audit names the binding's route.
func TestTrafficAliasesReachTheirRPC(t *testing.T) {
	t.Parallel()
	h, logs, bs := auditedGateway(t)
	n := 0
	for _, b := range bs {
		if !strings.Contains(b.Path, "/rb/") {
			continue
		}
		require.True(t, strings.HasPrefix(b.Path, "/v2/projects/") && !strings.Contains(b.Path, "traffic-intent-sets") &&
			!strings.Contains(b.Path, "/intent/"), "%s binds %s: an alias, which the gateway rewrites, not a binding", b.RPC, b.Path)
		path := strings.Replace(variable.ReplaceAllString(b.Path, "x1"), "/v2/projects/x1/", "/v2/projects/a/", 1)
		for _, alias := range aliasesOf(path) {
			n++
			for _, c := range []struct {
				token string
				code  int
			}{{"pa-a", 503}, {"pa-b", 403}} {
				req := httptest.NewRequest(b.Method, alias, strings.NewReader(`{}`))
				req.Header.Set("Authorization", "Bearer "+c.token)
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				require.Equal(t, c.code, w.Code, "%s %s (%s): %s", b.Method, alias, b.RPC, w.Body)
				got := logs.TakeAll()
				require.NotEmpty(t, got, "%s %s: no audit line", b.Method, alias)
				line := got[len(got)-1].ContextMap()
				require.Equal(t, alias, line["object"], "the audit's object is the path sent")
				require.Equal(t, b.Path, strings.ReplaceAll(line["route"].(string), "=*}", "}"), "the audit's route is the binding's")
				if c.code == 503 {
					require.Equal(t, b.RPC, line["rpc"], "%s %s", b.Method, alias)
				}
			}
		}
	}
	require.Equal(t, 194, n, "spellings of the traffic URLs") // 4 per binding; resume and rollback added 8
}

// TestCanonicalTrafficPath: the rewrite itself, on the edges: encoded
// literals as the plain ones, a name that spells a literal stays a name,
// and what is not a traffic URL passes as it is.
func TestCanonicalTrafficPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/v2/project/p/rb/c/v/traffic-intent-groups":                            "/v2/projects/p/rb/c/v/traffic-intent-groups",
		"/v2/%70roject/p/rb/c/v/traffic-intent-sets/g/apply":                    "/v2/projects/p/rb/c/v/traffic-intent-groups/g/apply",
		"/v2/projects/p/rb/c/v/intent/g/connectivity/external/inbound/i":        "/v2/projects/p/rb/c/v/traffic-intent-groups/g/externalinboundaccess/i",
		"/v2/projects/p/rb/c/v/intent/g/connectivity/dnsproviders":              "/v2/projects/p/rb/c/v/traffic-intent-groups/g/dnsproviders",
		"/v2/project/project/rb/rb/v/intent/intent/connectivity/intracluster/x": "/v2/projects/project/rb/rb/v/traffic-intent-groups/intent/intraclusterservice/x",
	} {
		got, ok := canonicalTrafficPath(in)
		require.True(t, ok, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{
		"/v2/projects/p/rb/c/v/traffic-intent-groups/g/interclusterservice",
		"/v2/projects/p/logical-clouds/lc/cluster-references",
		"/v2/project/p",
		"/v2/project/p/rb/c",
		"/v2/projects/p/rb/c/v/intent/g/connectivity/external",
		"/v2/projects/p/rb/c/v/intent/g/connectivity/elsewhere",
		"/v2/%2570roject/p/rb/c/v/traffic-intent-groups",
		"/v1/project/p/rb/c/v/traffic-intent-sets",
	} {
		got, ok := canonicalTrafficPath(in)
		require.False(t, ok, "%s became %s", in, got)
	}
}

// TestTrafficAliasNotFoundNamesTheURLSent: a 404 on an alias spelling
// names the path the client sent, not the rewritten one.
func TestTrafficAliasNotFoundNamesTheURLSent(t *testing.T) {
	t.Parallel()
	h := testGateway(t, zap.NewNop())
	req := httptest.NewRequest("GET", "/v2/project/a/rb/c/v/traffic-intent-sets/g/nothing", nil)
	req.Header.Set("Authorization", "Bearer pa-a")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	require.Equal(t, 404, w.Code, "%s", w.Body)
	require.Contains(t, w.Body.String(), "no route for GET /v2/project/a/rb/c/v/traffic-intent-sets/g/nothing")
}

// TestTrailingSlashReachesEveryRoute: every URL the contracts bind, and
// the traffic aliases of each, sent with one trailing slash (as seeds 001
// and 004 write their collection URLs) reaches the same method as sent
// without, in both dialects, and the audit names the path sent.
func TestTrailingSlashReachesEveryRoute(t *testing.T) {
	t.Parallel()
	h, logs, bs := auditedGateway(t)
	// send answers the status and the audit's rpc and object.
	send := func(method, path, dialect string) (int, string, string) {
		req := httptest.NewRequest(method, path, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+pki.AdminTokenPrefix+"x")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(DialectHeader, dialect)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		got := logs.TakeAll()
		require.NotEmpty(t, got, "%s %s: no audit line", method, path)
		line := got[len(got)-1].ContextMap()
		rpc, _ := line["rpc"].(string)
		return w.Code, rpc, line["object"].(string)
	}
	n := 0
	for _, b := range bs {
		path := variable.ReplaceAllString(b.Path, "x1")
		spellings := []string{path}
		if strings.Contains(b.Path, "/rb/") {
			spellings = aliasesOf(path)
		}
		for _, p := range spellings {
			for _, dialect := range []string{DialectDCM, DialectEMCO} {
				n++
				code, rpc, _ := send(b.Method, p, dialect)
				require.Equal(t, 503, code, "%s %s: the unreachable service", b.Method, p)
				require.Equal(t, b.RPC, rpc, "%s %s", b.Method, p)
				slashCode, slashRPC, object := send(b.Method, p+"/", dialect)
				require.Equal(t, code, slashCode, "%s %s/", b.Method, p)
				require.Equal(t, rpc, slashRPC, "%s %s/", b.Method, p)
				require.Equal(t, p+"/", object, "the audit's object is the path sent")
			}
		}
	}
	require.Greater(t, n, 400, "URLs tried")
}
