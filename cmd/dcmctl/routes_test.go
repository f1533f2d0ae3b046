package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestKindsRoutes: every kind's collection is its Create RPC's binding in
// the contract (routes_gen.go, generated from proto/), the URLs and parent
// keys are the ones documents and get flags use (docs/dcmctl.md), and the
// contract binds each kind's item (collection/{name}) for GET, PUT and
// DELETE, as get, apply and delete call it.
func TestKindsRoutes(t *testing.T) {
	want := map[string]string{
		"Project":                "/v2/projects",
		"ClusterProvider":        "/v2/cluster-providers",
		"Cluster":                "/v2/cluster-providers/{provider}/clusters",
		"ClusterSet":             "/v2/cluster-sets",
		"LogicalCloud":           "/v2/projects/{project}/logical-clouds",
		"ClusterReference":       "/v2/projects/{project}/logical-clouds/{logicalCloud}/cluster-references",
		"UserPermission":         "/v2/projects/{project}/logical-clouds/{logicalCloud}/user-permissions",
		"ClusterQuota":           "/v2/projects/{project}/logical-clouds/{logicalCloud}/cluster-quotas",
		"KVPair":                 "/v2/projects/{project}/logical-clouds/{logicalCloud}/kv-pairs",
		"TrafficIntentGroup":     "/v2/projects/{project}/rb/{compositeApp}/{version}/traffic-intent-groups",
		"InterClusterIntent":     "/v2/projects/{project}/rb/{compositeApp}/{version}/traffic-intent-groups/{group}/interclusterservice",
		"IntraClusterIntent":     "/v2/projects/{project}/rb/{compositeApp}/{version}/traffic-intent-groups/{group}/intraclusterservice",
		"ExternalOutboundIntent": "/v2/projects/{project}/rb/{compositeApp}/{version}/traffic-intent-groups/{group}/externaloutboundaccess",
		"ExternalInboundIntent":  "/v2/projects/{project}/rb/{compositeApp}/{version}/traffic-intent-groups/{group}/externalinboundaccess",
		"DNSProviderIntent":      "/v2/projects/{project}/rb/{compositeApp}/{version}/traffic-intent-groups/{group}/dnsproviders",
	}
	variable := regexp.MustCompile(`\{[^}]*\}`)
	shape := func(p string) string { return variable.ReplaceAllString(p, "{}") }
	bound := func(method, tmpl string) bool {
		for _, rs := range routes {
			for _, r := range rs {
				if r.Method == method && shape(r.Path) == shape(tmpl) {
					return true
				}
			}
		}
		return false
	}
	var names []string
	for _, k := range kinds {
		names = append(names, k.Name)
		if k.Path != want[k.Name] {
			t.Errorf("%s: collection %q, want %q", k.Name, k.Path, want[k.Name])
		}
		var parents []string
		for _, m := range variable.FindAllString(want[k.Name], -1) {
			parents = append(parents, strings.Trim(m, "{}"))
		}
		if !slices.Equal(k.Parents, parents) {
			t.Errorf("%s: parents %q, want %q", k.Name, k.Parents, parents)
		}
		if !bound("POST", k.Path) {
			t.Errorf("%s: no POST %s in the contract", k.Name, k.Path)
		}
		for _, m := range []string{"GET", "PUT", "DELETE"} {
			if !bound(m, k.Path+"/{name}") {
				t.Errorf("%s: no %s %s/{name} in the contract", k.Name, m, k.Path)
			}
		}
		if !bound("GET", k.Path) {
			t.Errorf("%s: no GET %s (the list) in the contract", k.Name, k.Path)
		}
	}
	if len(names) != len(want) {
		t.Errorf("kinds %q, want one each of %d", names, len(want))
	}
}

// TestCollectionRouteRefuses: a kind whose RPC has no binding, or no POST
// one, is an error naming it, not a URL guessed.
func TestCollectionRouteRefuses(t *testing.T) {
	for _, rpc := range []string{"/dcm.core.v1.CoreService/NoSuchMethod", "/dcm.core.v1.CoreService/GetProject"} {
		if _, _, err := collectionRoute(rpc); err == nil || !strings.Contains(err.Error(), rpc) {
			t.Errorf("collectionRoute(%s) = %v, want an error naming it", rpc, err)
		}
	}
}

// TestCommandRoutes: the lifecycle, kubeconfig, token and login commands
// call the URLs of their RPCs' bindings (routes_gen.go), names escaped;
// a URL the contract lacks is an error, not a guess.
func TestCommandRoutes(t *testing.T) {
	lc := func(method, rpc string, more map[string]string) string {
		u, err := lcURL(method, rpc, "proj 1", "lc/1", more)
		if err != nil {
			t.Fatalf("%s %s: %v", method, rpc, err)
		}
		return u
	}
	plain := func(method, rpc string, vals map[string]string) string {
		u, err := routeURL(method, rpc, vals)
		if err != nil {
			t.Fatalf("%s %s: %v", method, rpc, err)
		}
		return u
	}
	base := "/v2/projects/proj%201/logical-clouds/lc%2F1"
	for _, c := range [][2]string{
		{lc("POST", lcVerbs["apply"], nil), base + "/apply"},
		{lc("POST", lcVerbs["update"], nil), base + "/update"},
		{lc("POST", lcVerbs["stop"], nil), base + "/stop"},
		{lc("POST", lcVerbs["resume"], nil), base + "/resume"},
		{lc("POST", lcVerbs["rollback"], nil), base + "/rollback"},
		{lc("POST", lcVerbs["terminate"], nil), base + "/terminate"},
		{lc("GET", rpcLCStatus, nil), base + "/status"},
		{lc("GET", rpcKubeconfig, map[string]string{"cluster_name": "c1"}), base + "/cluster-references/c1/kubeconfig"},
		{plain("POST", rpcCreateToken, nil), "/v2/auth/tokens"},
		{plain("GET", rpcListTokens, nil), "/v2/auth/tokens"},
		{plain("DELETE", rpcDeleteToken, map[string]string{"id": "t 1"}), "/v2/auth/tokens/t%201"},
		{plain("GET", rpcListProjects, nil), "/v2/projects"},
	} {
		if c[0] != c[1] {
			t.Errorf("URL %q, want %q", c[0], c[1])
		}
	}
	tg := &tgFlags{project: "proj 1", app: "book/info", version: "v1"}
	tgBase := "/v2/projects/proj%201/rb/book%2Finfo/v1/traffic-intent-groups/g%201"
	for verb, rpc := range tgVerbs {
		if u, err := tg.url("POST", rpc, "g 1"); err != nil || u != tgBase+"/"+verb {
			t.Errorf("traffic-group %s: URL %q, %v, want %q", verb, u, err, tgBase+"/"+verb)
		}
	}
	if u, err := tg.url("GET", rpcTGStatus, "g 1"); err != nil || u != tgBase+"/status" {
		t.Errorf("traffic-group status: URL %q, %v", u, err)
	}
	if _, err := lcURL("POST", lcVerbs["apply"], "", "lc", nil); err == nil || !strings.Contains(err.Error(), "-p") {
		t.Errorf("no project: %v, want the -p error", err)
	}
	if _, err := routeURL("DELETE", rpcDeleteToken, nil); err == nil || !strings.Contains(err.Error(), rpcDeleteToken) {
		t.Errorf("a binding without the variables given: %v, want an error naming the RPC", err)
	}
	if _, err := routeURL("GET", rpcKubeconfig, map[string]string{"project": "p", "logical_cloud": "l", "cluster_name": "c", "extra": "x"}); err == nil {
		t.Error("a variable no binding has was accepted")
	}
}
