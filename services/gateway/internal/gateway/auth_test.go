package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dcm-project/dcm/platform/pki"
)

func TestRouteOf(t *testing.T) {
	t.Parallel()
	r := routeOf("/v2/projects/{project=*}/logical-clouds/{logical_cloud=*}/cluster-references/{cluster_name=*}/kubeconfig",
		map[string]string{"project": "p1", "logical_cloud": "lc", "cluster_name": "c1"})
	require.Equal(t, []string{"v2", "projects", "{project}", "logical-clouds", "{logical_cloud}", "cluster-references", "{cluster_name}", "kubeconfig"}, r.Segments)
	require.True(t, r.Credential())
	project, scoped, isList := r.project()
	require.Equal(t, "p1", project)
	require.True(t, scoped)
	require.False(t, isList)

	_, scoped, isList = routeOf("/v2/projects", nil).project()
	require.False(t, scoped)
	require.True(t, isList)
	_, scoped, _ = routeOf("/v2/cluster-providers/{name=*}", map[string]string{"name": "projects"}).project()
	require.False(t, scoped, "a variable's value is never read as a literal")
	require.True(t, routeOf("/v2/auth/tokens", nil).Credential())
	require.False(t, routeOf("/v2/projects/{project=*}", map[string]string{"project": "kubeconfig"}).Credential(),
		"only the template decides what a route is")
}

// TestAuthorizeTable: what each role may do, on routes as the router
// matched them. The project comes from the path parameter, so a value
// that merely looks like another route changes nothing.
func TestAuthorizeTable(t *testing.T) {
	t.Parallel()
	admin := pki.Identity{Role: pki.RoleAdmin}
	pa := pki.Identity{Role: pki.RoleProjectAdmin, Project: "a"}
	reader := pki.Identity{Role: pki.RoleReader, Project: "a"}
	global := pki.Identity{Role: pki.RoleReader}
	svc := pki.Identity{Role: pki.RoleService}
	lc := "/v2/projects/{project=*}/logical-clouds/{logical_cloud=*}"
	in := func(p string) map[string]string { return map[string]string{"project": p, "logical_cloud": "l"} }
	cases := []struct {
		who     pki.Identity
		method  string
		tmpl    string
		params  map[string]string
		allowed bool
	}{
		{admin, "DELETE", "/v2/projects/{project=*}", in("b"), true},
		{pa, "POST", lc + "/apply", in("a"), true},
		{pa, "POST", lc + "/apply", in("b"), false},
		{pa, "GET", lc + "/cluster-references/{cluster_name=*}/kubeconfig", in("a"), true},
		{reader, "GET", lc + "/cluster-references/{cluster_name=*}/kubeconfig", in("a"), false},
		{reader, "GET", lc + "/status", in("a"), true},
		{reader, "GET", lc + "/status", in("b"), false},
		{reader, "POST", lc + "/apply", in("a"), false},
		{global, "GET", lc + "/status", in("b"), true},
		{global, "GET", "/v2/projects", nil, true},
		{reader, "GET", "/v2/projects", nil, false},
		{pa, "GET", "/v2/projects", nil, false},
		{pa, "GET", "/v2/cluster-providers", nil, true},
		{pa, "POST", "/v2/cluster-providers", nil, false},
		{pa, "GET", "/v2/auth/tokens", nil, false},
		{global, "GET", "/v2/auth/tokens", nil, false},
		{pa, "POST", "/v2/admin/keys/rewrap", nil, false},
		{svc, "GET", "/v2/cluster-providers", nil, false},
		{pa, "GET", "/v2/project/{project=*}/rb/{rb=*}", map[string]string{"project": "a"}, true},
		{pa, "POST", "/v1/cadist/projects/{project=*}/x", map[string]string{"project": "b"}, false},
		{pa, "GET", "/v1/cadist/projects/{project=*}/logicalclouds/{logical_cloud=*}/clusters/{cluster=*}", in("a"), true},
		{pa, "GET", "/v1/cadist/projects/{project=*}/logicalclouds/{logical_cloud=*}/clusters/{cluster=*}", in("b"), false},
		{reader, "GET", "/v1/cadist/projects/{project=*}/logicalclouds/{logical_cloud=*}/clusters/{cluster=*}", in("a"), true},
		{pa, "POST", lc + "/ca/rotate", in("a"), true},
		{reader, "POST", lc + "/ca/rotate", in("a"), false},
		{pa, "GET", "/v2/cadist/roots/{name=*}/certificate", map[string]string{"name": "r"}, true},
		// Seed 002's control-plane POST (core's) and the service mesh routes:
		// project-admins of the project, readers GET.
		{pa, "POST", "/v2/projects/{project=*}/logical-clouds/control-plane", map[string]string{"project": "a"}, true},
		{pa, "POST", "/v2/projects/{project=*}/logical-clouds/control-plane", map[string]string{"project": "b"}, false},
		{reader, "POST", "/v2/projects/{project=*}/logical-clouds/control-plane", map[string]string{"project": "a"}, false},
		{reader, "GET", lc + "/service-mesh", in("a"), true},
		{reader, "GET", lc + "/service-mesh", in("b"), false},
		{pa, "DELETE", "/v2/projects/{project=*}/logical-clouds/{name=*}/control-plane", map[string]string{"project": "a", "name": "l"}, true},
		// The traffic controller's routes, in both spellings: project-admins of
		// the project, readers GET.
		{pa, "POST", "/v2/project/{project=*}/rb/{composite_app=*}/{version=*}/traffic-intent-groups", map[string]string{"project": "a"}, true},
		{pa, "POST", "/v2/project/{project=*}/rb/{composite_app=*}/{version=*}/traffic-intent-groups", map[string]string{"project": "b"}, false},
		{pa, "POST", "/v2/projects/{project=*}/rb/{composite_app=*}/{version=*}/intent/{group=*}/connectivity/intracluster", map[string]string{"project": "a"}, true},
		{pa, "POST", "/v2/projects/{project=*}/rb/{composite_app=*}/{version=*}/intent/{group=*}/connectivity/intracluster", map[string]string{"project": "b"}, false},
		{pa, "DELETE", "/v2/project/{project=*}/rb/{composite_app=*}/{version=*}/traffic-intent-sets/{group=*}/dnsproviders/{name=*}", map[string]string{"project": "b"}, false},
		{reader, "GET", "/v2/project/{project=*}/rb/{composite_app=*}/{version=*}/traffic-intent-groups/{group=*}/interclusterservice", map[string]string{"project": "a"}, true},
		{reader, "PUT", "/v2/projects/{project=*}/rb/{composite_app=*}/{version=*}/traffic-intent-groups/{name=*}", map[string]string{"project": "a"}, false},
		{pa, "POST", "/v2/project/{project=*}/rb/{composite_app=*}/{version=*}/traffic-intent-groups/{name=*}/apply", map[string]string{"project": "b"}, false},
		// A project's DNS allow-list: the gateway lets its members through
		// (readers GET); the traffic service refuses writes to all but admins.
		{pa, "PUT", "/v2/projects/{project=*}/dns-allow-list", map[string]string{"project": "a"}, true},
		{pa, "PUT", "/v2/projects/{project=*}/dns-allow-list", map[string]string{"project": "b"}, false},
		{reader, "GET", "/v2/projects/{project=*}/dns-allow-list", map[string]string{"project": "a"}, true},
		{reader, "PUT", "/v2/projects/{project=*}/dns-allow-list", map[string]string{"project": "a"}, false},
		// A project parameter that is not a's, however it was spelled.
		{pa, "POST", lc + "/apply", in("a/../b"), false},
		{pa, "POST", lc + "/apply", in(""), false},
	}
	for _, c := range cases {
		got := Authorize(c.who, c.method, routeOf(c.tmpl, c.params))
		require.Equal(t, c.allowed, got, "%+v %s %s %v", c.who, c.method, c.tmpl, c.params)
	}
}

// TestEncodedSlashRefused: an encoded "/" never reaches the router, and is
// audited with the path as sent.
func TestEncodedSlashRefused(t *testing.T) {
	t.Parallel()
	auth := &Authenticator{AdminToken: pki.AdminTokenPrefix + "x"}
	core, logs := observer.New(zap.InfoLevel)
	reached := false
	h := secure(auth, zap.New(core), http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	for _, path := range []string{"/v2/projects/a%2Fb", "/v2/projects/a%2f..%2fb/logical-clouds"} {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+pki.AdminTokenPrefix+"x")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		require.Equal(t, 400, w.Code, path)
		require.JSONEq(t, `{"code":400,"status":"InvalidArgument","message":"path: a path segment may not contain an encoded '/' (%2F)","field":"path"}`, w.Body.String())
		require.Equal(t, 1, logs.FilterField(zap.String("raw_path", path)).FilterField(zap.String("result", "refused")).Len(), path)
	}
	require.False(t, reached)
}
