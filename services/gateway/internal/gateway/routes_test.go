package gateway

import (
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/server"
)

// TestDialectRoutesFromBindings: the EMCO dialect rewrites the bodies of
// exactly the bindings the contracts declare with a logical cloud's, a
// cluster reference's or a user permission's body (all spellings), and of
// no other route; a request on any binding is recognised as its kind.
func TestDialectRoutesFromBindings(t *testing.T) {
	t.Parallel()
	require.NoError(t, routesErr)
	var got []string
	for _, r := range dialectRoutes {
		got = append(got, r.method+" "+r.template+" "+r.kind)
	}
	slices.Sort(got)
	require.Equal(t, []string{
		"POST /v2/projects/{project}/logical-clouds logical cloud",
		"POST /v2/projects/{project}/logical-clouds/{logical_cloud}/cluster-providers/{cluster_provider}/cluster-references cluster reference",
		"POST /v2/projects/{project}/logical-clouds/{logical_cloud}/cluster-references cluster reference",
		"POST /v2/projects/{project}/logical-clouds/{logical_cloud}/user-permissions user permission",
		"PUT /v2/projects/{project}/logical-clouds/{logical_cloud} logical cloud",
		"PUT /v2/projects/{project}/logical-clouds/{logical_cloud}/cluster-providers/{cluster_provider}/cluster-references/{cluster_name} cluster reference",
		"PUT /v2/projects/{project}/logical-clouds/{logical_cloud}/cluster-references/{name} cluster reference",
		"PUT /v2/projects/{project}/logical-clouds/{logical_cloud}/user-permissions/{name} user permission",
	}, got)

	bs, err := server.HTTPBindings()
	require.NoError(t, err)
	variable := regexp.MustCompile(`\{[^}]*\}`)
	seen := 0
	for _, b := range bs {
		path := variable.ReplaceAllString(b.Path, "x1")
		want := ""
		if b.Body != nil {
			want = dialectBodies[b.Body.FullName()]
		}
		for _, p := range []string{path, path + "/"} {
			_, sp, code, _ := through(t, DialectDCM, b.Method, p, "", `{}`)
			require.Equal(t, 299, code, "%s %s", b.Method, p)
			require.Equal(t, want, sp.kind, "%s %s (%s)", b.Method, p, b.RPC)
		}
		if want != "" {
			seen++
		}
	}
	require.Equal(t, len(dialectRoutes), seen, "every dialect route is a binding")
	for _, p := range []string{"/v2/projects/p/logical-clouds//", "/v2/projects//logical-clouds", "/v2/projects/p/logical-clouds/lc/user-permissions/a/b"} {
		_, sp, _, _ := through(t, DialectDCM, "POST", p, "", `{}`)
		require.Empty(t, sp.kind, p)
		_, sp, _, _ = through(t, DialectDCM, "PUT", p, "", `{}`)
		require.Empty(t, sp.kind, p)
	}
}

// TestClustersRouteFromBinding: EMCO's multipart form is read on
// CreateCluster's binding, one segment of provider, no other path.
func TestClustersRouteFromBinding(t *testing.T) {
	t.Parallel()
	require.Equal(t, "/v2/cluster-providers/{provider}/clusters", clustersRoute)
	p, ok := matchTemplate(clustersRoute, "/v2/cluster-providers/cp1/clusters", false)
	require.True(t, ok)
	require.Equal(t, map[string]string{"provider": "cp1"}, p)
	for _, path := range []string{"/v2/cluster-providers//clusters", "/v2/cluster-providers/a/b/clusters",
		"/v2/cluster-providers/cp1/clusters/", "/v2/cluster-providers/cp1/clusters/c1", "/v2/cluster-providers/cp1"} {
		_, ok := matchTemplate(clustersRoute, path, false)
		require.False(t, ok, path)
	}
}

// TestClusterRouteFromBinding: EMCO's multipart update is read on
// UpdateCluster's PUT binding.
func TestClusterRouteFromBinding(t *testing.T) {
	t.Parallel()
	require.Equal(t, "/v2/cluster-providers/{provider}/clusters/{name}", clusterRoute)
	p, ok := matchTemplate(clusterRoute, "/v2/cluster-providers/cp1/clusters/c1", false)
	require.True(t, ok)
	require.Equal(t, map[string]string{"provider": "cp1", "name": "c1"}, p)
}

// TestCheckTemplate: a template the matcher would read wrong is refused,
// naming it.
func TestCheckTemplate(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"/v2/projects", "/v2/projects/{project}", "/v2/projects/{project=*}/x"} {
		require.NoError(t, checkTemplate(ok), ok)
	}
	for _, bad := range []string{"v2/projects", "/v2/{name=**}", "/v2/{name=projects/*}", "/v2/x:verb", "/v2//x", "/v2/a{b}", "/v2/**"} {
		err := checkTemplate(bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), bad)
	}
}
