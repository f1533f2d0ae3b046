package allinone_test

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// The REST fuzz target (FuzzRESTBodies) sends any body to any REST route
// that takes one, through the whole program, as the bootstrap admin (so a
// body reaches the services' validation, not a 403). The rule: no 5xx, no
// panic anywhere, and the program still answers.
//
// One target for every route, the route picked by the input, rather than a
// target per body type: each fuzz worker starts the whole program once, the
// inputs of one route are often good seeds for another (metadata, names,
// quantities, rules appear in many bodies), and `make fuzz` gives each
// target ten minutes: seventeen targets would take three hours of the two
// cores. TestFuzzRoutesComplete keeps the route list complete.

// The parents every fuzzed body hangs under, made before the fuzzing starts.
const (
	fzProject    = "fz"
	fzLC         = "fz-lc"    // a standard logical cloud, never applied
	fzVerbsLC    = "fz-verbs" // the one the lifecycle verbs run on
	fzProvider   = "fz-cp"
	fzCluster    = "fz-cl"  // referenced by fz-lc
	fzCluster2   = "fz-cl2" // free, for a cluster reference to take
	fzClusterSet = "fz-set" // bound to no project: its spec may be fuzzed
)

// fzKubeconfig is a kubeconfig DCM accepts (nothing dials it).
const fzKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: edge
  cluster:
    server: https://127.0.0.1:6443
users:
- name: admin
  user:
    token: fuzz-token
contexts:
- name: admin@edge
  context: {cluster: edge, user: admin}
current-context: admin@edge
`

// fuzzRoute is a REST route that takes a body, as the fuzz target calls it.
type fuzzRoute struct {
	// key tags the seeds of the route (testdata/fuzz/FuzzRESTBodies keeps
	// them by key, so the list may be reordered).
	key string
	// method and template as in the route's google.api.http option.
	method, template string
	// path is the URL called: the template with the fuzz parents.
	path string
	// made is, for a create, the path of what a 2xx answer made (from the
	// answer), to delete it again: the store stays as small as it started.
	made func(answer map[string]any) string
}

const fzLCPath = "/v2/projects/" + fzProject + "/logical-clouds/" + fzLC

// str reads a string at a path of keys in a decoded JSON answer.
func str(m map[string]any, keys ...string) string {
	for i, k := range keys {
		if i == len(keys)-1 {
			s, _ := m[k].(string)
			return url.PathEscape(s)
		}
		m, _ = m[k].(map[string]any)
	}
	return ""
}

func under(prefix string, keys ...string) func(map[string]any) string {
	return func(m map[string]any) string { return prefix + "/" + str(m, keys...) }
}

const lcTemplate = "/v2/projects/{project}/logical-clouds/{logical_cloud}"

// fuzzRoutes are every REST route that takes a body (TestFuzzRoutesComplete
// checks them against the gateway's routes).
var fuzzRoutes = append([]fuzzRoute{
	{"project.create", "POST", "/v2/projects", "/v2/projects", under("/v2/projects", "metadata", "name")},
	{"project.update", "PUT", "/v2/projects/{project}", "/v2/projects/" + fzProject, nil},
	{"lc.create", "POST", "/v2/projects/{project}/logical-clouds", "/v2/projects/" + fzProject + "/logical-clouds",
		func(m map[string]any) string {
			if msg, _ := m["message"].(string); strings.HasPrefix(msg, "user added") {
				// Seed 002's form naming an existing logical cloud added a user.
				return "/v2/projects/" + fzProject + "/logical-clouds/" + str(m, "name") + "/users/" + str(m, "user")
			}
			return under("/v2/projects/"+fzProject+"/logical-clouds", "name")(m)
		}},
	{"lc.update", "PUT", lcTemplate, fzLCPath, nil},
	{"lc.apply", "POST", lcTemplate + "/apply", "/v2/projects/" + fzProject + "/logical-clouds/" + fzVerbsLC + "/apply", nil},
	{"lc.instantiate", "POST", lcTemplate + "/instantiate", "/v2/projects/" + fzProject + "/logical-clouds/" + fzVerbsLC + "/instantiate", nil},
	{"lc.update-resources", "POST", lcTemplate + "/update", "/v2/projects/" + fzProject + "/logical-clouds/" + fzVerbsLC + "/update", nil},
	{"lc.stop", "POST", lcTemplate + "/stop", "/v2/projects/" + fzProject + "/logical-clouds/" + fzVerbsLC + "/stop", nil},
	{"lc.resume", "POST", lcTemplate + "/resume", "/v2/projects/" + fzProject + "/logical-clouds/" + fzVerbsLC + "/resume", nil},
	{"lc.rollback", "POST", lcTemplate + "/rollback", "/v2/projects/" + fzProject + "/logical-clouds/" + fzVerbsLC + "/rollback", nil},
	{"lc.terminate", "POST", lcTemplate + "/terminate", "/v2/projects/" + fzProject + "/logical-clouds/" + fzVerbsLC + "/terminate", nil},
	{"clusterref.create", "POST", lcTemplate + "/cluster-references", fzLCPath + "/cluster-references",
		func(m map[string]any) string {
			return fzLCPath + "/cluster-providers/" + str(m, "cluster-provider") + "/cluster-references/" + str(m, "cluster-name")
		}},
	{"clusterref.create-under-provider", "POST", lcTemplate + "/cluster-providers/{cluster_provider}/cluster-references",
		fzLCPath + "/cluster-providers/" + fzProvider + "/cluster-references",
		under(fzLCPath+"/cluster-providers/"+fzProvider+"/cluster-references", "cluster-name")},
	{"clusterref.update", "PUT", lcTemplate + "/cluster-providers/{cluster_provider}/cluster-references/{cluster_name}",
		fzLCPath + "/cluster-providers/" + fzProvider + "/cluster-references/" + fzCluster, nil},
	// EMCO's spelling: the reference by its own name (the cluster's, by default).
	{"clusterref.update-by-name", "PUT", lcTemplate + "/cluster-references/{name}",
		fzLCPath + "/cluster-references/" + fzCluster, nil},
	{"kv.create", "POST", lcTemplate + "/kv-pairs", fzLCPath + "/kv-pairs", under(fzLCPath+"/kv-pairs", "metadata", "name")},
	{"kv.update", "PUT", lcTemplate + "/kv-pairs/{name}", fzLCPath + "/kv-pairs/fz-kv", nil},
	{"user.create", "POST", lcTemplate + "/users", fzLCPath + "/users", under(fzLCPath+"/users", "user")},
	{"permission.create", "POST", lcTemplate + "/user-permissions", fzLCPath + "/user-permissions",
		under(fzLCPath+"/user-permissions", "permission-name")},
	{"permission.update", "PUT", lcTemplate + "/user-permissions/{name}", fzLCPath + "/user-permissions/fz-perm", nil},
	{"quota.create", "POST", lcTemplate + "/cluster-quotas", fzLCPath + "/cluster-quotas", under(fzLCPath+"/cluster-quotas", "metadata", "name")},
	{"quota.update", "PUT", lcTemplate + "/cluster-quotas/{name}", fzLCPath + "/cluster-quotas/fz-q", nil},
	{"containerdefaults.update", "PUT", lcTemplate + "/container-defaults", fzLCPath + "/container-defaults", nil},
	{"provider.create", "POST", "/v2/cluster-providers", "/v2/cluster-providers", under("/v2/cluster-providers", "metadata", "name")},
	{"provider.update", "PUT", "/v2/cluster-providers/{name}", "/v2/cluster-providers/" + fzProvider, nil},
	{"cluster.create", "POST", "/v2/cluster-providers/{provider}/clusters", "/v2/cluster-providers/" + fzProvider + "/clusters",
		under("/v2/cluster-providers/"+fzProvider+"/clusters", "metadata", "name")},
	{"cluster.update", "PUT", "/v2/cluster-providers/{provider}/clusters/{name}", "/v2/cluster-providers/" + fzProvider + "/clusters/" + fzCluster, nil},
	{"clusterset.create", "POST", "/v2/cluster-sets", "/v2/cluster-sets", under("/v2/cluster-sets", "metadata", "name")},
	{"clusterset.update", "PUT", "/v2/cluster-sets/{name}", "/v2/cluster-sets/" + fzClusterSet, nil},
	{"binding.create", "POST", "/v2/projects/{project}/cluster-set-bindings", "/v2/projects/" + fzProject + "/cluster-set-bindings",
		under("/v2/projects/"+fzProject+"/cluster-set-bindings", "cluster-set")},
	{"root.create", "POST", "/v2/cadist/roots", "/v2/cadist/roots", under("/v2/cadist/roots", "metadata", "name")},
	// core's since it creates the logical cloud: delete that, and its
	// control plane record goes with it.
	{"controlplane.create", "POST", "/v2/projects/{project}/logical-clouds/control-plane", "/v2/projects/" + fzProject + "/logical-clouds/control-plane",
		under("/v2/projects/"+fzProject+"/logical-clouds", "name")},
	{"ca.rotate", "POST", "/v2/projects/{project}/logical-clouds/{logical_cloud}/ca/rotate",
		"/v2/projects/" + fzProject + "/logical-clouds/" + fzVerbsLC + "/ca/rotate", nil},
	{"token.create", "POST", "/v2/auth/tokens", "/v2/auth/tokens", under("/v2/auth/tokens", "info", "id")},
	{"admin.rewrap", "POST", "/v2/admin/keys/rewrap", "/v2/admin/keys/rewrap", nil},
}, trafficFuzzRoutes()...)

// fuzzSeeds are the bodies of docs/walkthrough.md, shared/API.md
// and the seed pages (their comments taken out, and once as written), each
// tagged with its route.
var fuzzSeeds = append([]struct{ route, query, body string }{
	{"project.create", "", `{"metadata":{"name":"proj1","description":"finance department","userData1":"a","userData2":"b"}}`},
	{"project.create", "", `{"metadata":{"name":"Bad_Name"}}`},
	{"project.create", "", `{"metadata":{"name":"a","owner":"x"}}`},
	{"project.update", "", `{"metadata":{"name":"fz","description":"payroll"}}`},
	{"lc.create", "", `{
  "metadata": {"name": "lc-1", "description": "logical cloud for the finance department"},
  "spec": {"namespace": "ns-1", "user": {"user-name": "user-1", "type": "certificate",
    "user-permissions": [
      {"permission-name": "permission-1", "apiGroups": ["stable.example.com"], "resources": ["secrets", "pods"], "verbs": ["get", "watch", "list", "create"]},
      {"permission-name": "permission-2", "apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]}}}`},
	{"lc.create", "", `{"metadata":{"name":"lc-1"},
  "spec":{"namespace":"ns-1","user":{"user-name":"user-1","user-permissions":[
    {"permission-name":"configmaps","apiGroups":[""],"resources":["configmaps"],"verbs":["get","list","create"]}]}}}`},
	{"lc.create", "", `{"name":"lc-2","cluster-labels":"edge,sriov",
  "resources":{"cpu":"400","memory":"1000Gi","dummy/dummyResource":100},
  "user":[{"name":"user-1","permissions":{"apiGroups":[""],"resources":["pods"],"verbs":["get"]},"quota":{"cpu":"100"}}]}`},
	{"lc.create", "", `{"metadata":{"name":"adm"},"spec":{"level":"admin"}}`},
	{"lc.create", "", `{"metadata":{"name":"priv"},"spec":{"level":"privileged","namespace":"priv-ns","pod-security":"restricted","user":{"user-name":"u","type":"token"}}}`},
	{"lc.create", "", `{"metadata":{"name":"lvl"},"spec":{"level":"1","namespace":"lvl-ns"}}`},
	// seed 000 as written, comments included
	{"lc.create", "", `{
"metadata" : {
"name": "lc-1", //unique name for the record
"description": "logical cloud for walmart finance department", //description for the logical cloud
"userData1":"<user data>",
"userData2":"<user data>"
},
"spec" : {
"namespace" : "ns-1", // one namespace per logical cloud
"user" : {
"user-name" : "user-1",
"type" : "certificate",
"user-permissions" : [
{ "permission-name" : "permission-1",
"apiGroups" : ["stable.example.com"],
"resources" : ["secrets", "pods"],
"verbs" : ["get", "watch", "list", "create"]
}
]
}
}
}`},
	// seed 002's flat body, without its comments and stray commas
	{"lc.create", "", `{"name": "logical-cloud-1", "description": "logical cloud for walmart finance department",
 "cluster-labels": "abc,xyz", "resources": {"cpu": "400", "memory": "1000Gi", "pods": "500", "dummy/dummyResource": 100},
 "user": [{"name": "user-1", "type": "certificate", "certificate": "/path/to/user1/logical cloud-1-user1.csr",
   "permissions": {"apiGroups": ["stable.example.com"], "resources": ["secrets", "pods"], "verbs": ["get", "watch", "list", "create"]},
   "quota": {"cpu": "100", "memory": "500Gi", "pods": "100", "dummy/dummyResource": 20}}]}`},
	{"lc.create", "", `{"name": "logical-cloud-1", "user": {"name": "user-2", "type": "certificate",
   "permissions": {"apiGroups": ["stable.example.com"], "resources": ["secrets", "pods"], "verbs": ["get", "watch", "list", "create"]},
   "quota": {"cpu": "200", "memory": "300Gi", "pods": "200", "dummy/dummyResource": 30}}}`},
	{"lc.update", "", `{"metadata":{"name":"fz-lc","description":"payroll"}}`},
	{"lc.update", "", `{"metadata":{"name":"fz-lc"},"spec":{"namespace":"other"}}`},
	{"lc.apply", "", ``},
	{"lc.instantiate", "", `{}`},
	{"lc.update-resources", "", ``},
	{"lc.stop", "", ``},
	{"lc.resume", "", ``},
	{"lc.rollback", "", `{}`},
	{"lc.terminate", "", ``},
	{"clusterref.create", "", `{"cluster-provider":"fz-cp","cluster-name":"fz-cl2","loadbalancer-ip":"0.0.0.0"}`},
	{"clusterref.create", "", `{"cluster-provider":"edge-provider","cluster-name":"cluster-1","loadbalancer-ip":"0.0.0.0"}`},
	{"clusterref.create-under-provider", "", `{"cluster-name":"fz-cl2"}`},
	{"clusterref.update", "", `{"loadbalancer-ip":"10.10.0.2"}`},
	{"clusterref.update-by-name", "", `{"metadata":{"name":"` + fzCluster + `","description":"d"},"spec":{"clusterProvider":"` + fzProvider + `","cluster":"` + fzCluster + `","loadBalancerIP":"10.10.0.3"}}`},
	{"clusterref.update", "", `{"loadbalancer-ip" : "0.0.0.0"}`},
	{"kv.create", "", `{"metadata":{"name":"kv-1","userData1":"x"},"spec":{"kv":[{"db.host":"10.0.0.9"},{"mode":"edge"}]}}`},
	{"kv.update", "", `{"metadata":{"name":"fz-kv"},"spec":{"kv":[{"mode":"core"}]}}`},
	{"user.create", "", `{"name":"fz-user","type":"token"}`},
	{"user.create", "", `{"name":"fz-u2","type":"certificate","permissions":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}],"quota":{"pods":"3"}}`},
	{"permission.create", "", `{"permission-name":"deployments","apiGroups":["apps"],"resources":["deployments","deployments/scale"],"verbs":["get","list","patch"]}`},
	{"permission.create", "", `{"permission-name":"ns","namespace":"other","apiGroups":[""],"resources":["pods"],"verbs":["get"]}`},
	{"permission.update", "", `{"permission-name":"fz-perm","apiGroups":["apps"],"resources":["deployments"],"verbs":["get"]}`},
	{"quota.create", "", `{"metadata":{"name":"quota-1"},"spec":{"cpu":"400","memory":"1000Gi","pods":"500","limits.cpu":"2000m","dummy/dummyResource":100}}`},
	{"quota.create", "", `{"metadata":{"name":"quota-1"},"spec":{"configmaps":10,"requests.cpu":"2"}}`},
	{"quota.update", "", `{"metadata":{"name":"fz-q","description":"tuned"},"spec":{"cpu":"200","memory":"500Gi"}}`},
	{"containerdefaults.update", "", `{"default":{"cpu":"500m","memory":"256Mi"},"default-request":{"cpu":0.1,"memory":"128Mi"}}`},
	{"containerdefaults.update", "", `{"default":{"cpu":1e999,"x":null,"memory":"9Ei"},"default-request":{"memory":-1},"source":"x"}`},
	{"provider.create", "", `{"metadata":{"name":"edge-provider"}}`},
	{"provider.update", "", `{"metadata":{"name":"fz-cp","description":"edge"}}`},
	{"cluster.create", "", mustJSON(map[string]any{"metadata": map[string]string{"name": "cluster-1"},
		"spec": map[string]any{"kubeconfig": fzKubeconfig, "labels": []string{"edge"}}})},
	{"cluster.create", "", mustJSON(map[string]any{"metadata": map[string]string{"name": "insecure"},
		"spec": map[string]any{"kubeconfig": strings.Replace(fzKubeconfig, "https://127.0.0.1", "http://169.254.169.254", 1), "allow-insecure": true}})},
	{"cluster.update", "", `{"metadata":{"name":"fz-cl"},"spec":{"labels":["edge","sriov"]}}`},
	{"root.create", "", `{"metadata":{"name":"root-1"}}`},
	{"controlplane.create", "", `{"name":"fz-cp","namespace":"fz-cp-istio-system"}`},
	{"controlplane.create", "", `{"name":"fz-cp2","ca-cert":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n","ca-key":"x","root-cert":"","cert-chain":""}`},
	{"root.create", "", `{"metadata":{"name":"imported"},"certificate":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n","privateKey":"x"}`},
	{"ca.rotate", "", `{}`},
	{"ca.rotate", "", `{"root":"root-1"}`},
	{"token.create", "", `{"subject":"x","role":"reader"}`},
	{"token.create", "", `{"subject":"pa","role":"project-admin","project":"fz","ttl":"1h"}`},
	{"admin.rewrap", "", `{}`},
	// malformed and edge-case bodies (issue 16: "malformed bodies sometimes answer 500")
	{"project.create", "", `null`},
	{"project.update", "", `[]`},
	{"lc.create", "", `"x"`},
	{"lc.create", "", `{"metadata":null,"spec":null}`},
	{"lc.create", "", `{"name":"x","user":[null,{}],"resources":null}`},
	{"lc.create", "", `{"name":"x","user":"u","cluster-labels":["a"]}`},
	{"lc.update", "", `{"metadata":{"name":"fz-lc","userData1":"ÿþ"}}`},
	{"kv.create", "", `{"metadata":{"name":"kv"},"spec":{"kv":[{},{"a":{"b":[1,2]}},null]}}`},
	{"quota.create", "", `{"metadata":{"name":"q"},"spec":{"cpu":1e999,"memory":-0,"pods":"1e18Ei","x":null,"y":{"z":1}}}`},
	{"permission.create", "", `{"permission-name":"p","apiGroups":null,"resources":[""],"verbs":[null]}`},
	{"cluster.create", "", `{"metadata":{"name":"c"},"spec":{"kubeconfig":"{{{","labels":[""]}}`},
	{"clusterset.create", "", `{"metadata":{"name":"eu-sites"},"spec":{"clusters":[{"cluster-provider":"fz-cp","cluster-name":"fz-cl"}],"cluster-labels":["edge"]}}`},
	{"clusterset.create", "", `{"metadata":{"name":"all"},"spec":{"all-clusters":true,"cluster-provider":"fz-cp"}}`},
	{"clusterset.update", "", `{"metadata":{"name":"fz-set"},"spec":{"cluster-provider":"fz-cp"}}`},
	{"clusterset.update", "", `{"metadata":{"name":"other"},"spec":{}}`},
	{"binding.create", "", `{"cluster-set":"fz-set"}`},
	{"binding.create", "", `{"cluster-set":"Bad_Name"}`},
	{"token.create", "", `{"subject":"x","role":"admin","ttl":"-1h"}`},
	{"token.create", "", `{"subject":"x","role":"reader","ttl":"9999999h"}`},
	{"root.create", "", `{"metadata":{"name":"r"},"certificate":"-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----","privateKey":"-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----"}`},
	{"clusterref.update", "", `{"loadbalancer-ip":"::ffff:999.1.1.1"}`},
	{"project.create", "page-size=-1&page-token=%zz", `{"metadata":{"name":"q"}}`},
	{"kv.update", "metadata.name=x&kv_pair.metadata.name=y", `{"metadata":{"name":"fz-kv"}}`},
	{"project.create", "", strings.Repeat("[", 100000)},
	{"project.create", "", "{\"metadata\":{\"name\":\"a\xff\",\"description\":\"\\ud800\"}}"},
	{"lc.create", "", "{\"name\":\"x\",\"user\":[{\"name\":\"\xc3\x28\"}],\"resources\":{\"\xff\":1}}"},
	{"kv.create", "", "{\"metadata\":{\"name\":\"kv\"},\"spec\":{\"kv\":[{\"\xfe\":\"\\udfff\"}]}}"},
}, trafficFuzzSeeds()...) // the traffic controller's (traffic_api_test.go)

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// panicWatch is the program's log: it keeps the first line that tells of a
// panic (the gRPC recovery interceptor's "panic in handler", an error) and
// drops the rest, so ten minutes of fuzzing keep no log in memory. A panic
// in the gateway's HTTP handler is logged at info ("panic serving", below
// the test's level) but cannot hide: net/http resets the stream, and the
// fuzz target fails on a request without an answer.
type panicWatch struct {
	mu    sync.Mutex
	first string
}

func (w *panicWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("panic in handler")) || bytes.Contains(p, []byte("panic serving")) {
		w.mu.Lock()
		if w.first == "" {
			w.first = string(p)
		}
		w.mu.Unlock()
	}
	return len(p), nil
}

func (w *panicWatch) seen() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.first
}

// fuzzCall sends one request with the bootstrap admin token; an error is
// a transport failure (the program did not answer).
func fuzzCall(c *http.Client, token, method, u, contentType string, body []byte) (int, []byte, error) {
	path, query, _ := strings.Cut(u, "?")
	req, err := http.NewRequest(method, path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.URL.RawQuery = query // as sent, even what url.Parse would refuse
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// pickRoute is the route a seed names, or else the one the first byte of
// the fuzzed route picks.
func pickRoute(key string) fuzzRoute {
	for _, r := range fuzzRoutes {
		if r.key == key {
			return r
		}
	}
	if key == "" {
		return fuzzRoutes[0]
	}
	return fuzzRoutes[int(key[0])%len(fuzzRoutes)]
}

// FuzzRESTBodies: any body (and query string) on any REST route that takes
// a body answers below 500, panics nowhere, and leaves the program
// answering. The program starts once per fuzz process.
func FuzzRESTBodies(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.route, s.query, []byte(s.body))
	}
	logs := &panicWatch{}
	s := stacktest.StartWith(f, stacktest.Options{Logs: logs})
	r := apitest.NewREST(f, s)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"`+fzProject+`"}}`)
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"`+fzProvider+`"}}`)
	for _, c := range []string{fzCluster, fzCluster2} {
		r.Want(201, "POST", "/v2/cluster-providers/"+fzProvider+"/clusters", mustJSON(map[string]any{
			"metadata": map[string]string{"name": c}, "spec": map[string]any{"kubeconfig": fzKubeconfig, "labels": []string{"edge"}}}))
	}
	r.Want(201, "POST", "/v2/cluster-sets", `{"metadata":{"name":"`+fzClusterSet+`"},"spec":{"cluster-labels":["edge"]}}`)
	for lc, ns := range map[string]string{fzLC: "fz-ns", fzVerbsLC: "fz-verbs-ns"} {
		r.Want(201, "POST", "/v2/projects/"+fzProject+"/logical-clouds", `{"metadata":{"name":"`+lc+`"},
			"spec":{"namespace":"`+ns+`","user":{"user-name":"fz-user"}}}`)
	}
	r.Want(201, "POST", fzLCPath+"/cluster-references", `{"cluster-provider":"`+fzProvider+`","cluster-name":"`+fzCluster+`"}`)
	r.Want(201, "POST", fzLCPath+"/kv-pairs", `{"metadata":{"name":"fz-kv"},"spec":{"kv":[{"a":"b"}]}}`)
	r.Want(201, "POST", fzLCPath+"/user-permissions", `{"permission-name":"fz-perm","apiGroups":[""],"resources":["pods"],"verbs":["get"]}`)
	r.Want(201, "POST", fzLCPath+"/cluster-quotas", `{"metadata":{"name":"fz-q"},"spec":{"cpu":"1"}}`)
	// The group the traffic intent routes hang under.
	r.Want(201, "POST", "/v2/project/"+fzProject+fzTrafficApp+"/traffic-intent-groups",
		`{"name":"`+fzTrafficGroup+`","logical-cloud":"`+fzLC+`"}`)
	c := s.Client(nil)
	f.Cleanup(func() {
		if p := logs.seen(); p != "" {
			f.Errorf("the program logged a panic: %s", p)
		}
	})

	f.Fuzz(func(t *testing.T, route, query string, body []byte) {
		rt := pickRoute(route)
		if strings.ContainsFunc(query, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '#' }) {
			t.Skip("no query a client can send") // net/http refuses to write it
		}
		u := s.URL + rt.path
		if query != "" {
			u += "?" + query
		}
		code, answer, err := fuzzCall(c, s.AdminToken, rt.method, u, "application/json", body)
		if err != nil {
			t.Fatalf("%s %s %q: no answer: %v (log: %s)", rt.method, rt.path, body, err, logs.seen())
		}
		if code >= 500 {
			t.Fatalf("%s %s %q: %d %s", rt.method, rt.path, body, code, answer)
		}
		if p := logs.seen(); p != "" {
			t.Fatalf("%s %s %q: the program logged a panic: %s", rt.method, rt.path, body, p)
		}
		if code/100 == 2 && rt.made != nil {
			var m map[string]any
			if err := json.Unmarshal(answer, &m); err != nil {
				t.Fatalf("%s %s: %d with a body that is no JSON object: %s", rt.method, rt.path, code, answer)
			}
			del := rt.made(m)
			// 409: something holds it (a root made the default), it stays.
			if code, b, err := fuzzCall(c, s.AdminToken, "DELETE", s.URL+del, "application/json", nil); err != nil || (code != 204 && code != 409) {
				t.Fatalf("DELETE %s (made by %s %s %q): %d %s %v", del, rt.method, rt.path, body, code, b, err)
			}
		}
		if code, b, err := fuzzCall(c, s.AdminToken, "GET", s.URL+"/v2/projects/"+fzProject, "", nil); err != nil || code != 200 {
			t.Fatalf("after %s %s %q the program does not answer: %d %s %v", rt.method, rt.path, body, code, b, err)
		}
	})
}

// TestFuzzRoutesComplete: FuzzRESTBodies calls every route the gateway
// serves that takes a body (every POST, PUT and PATCH, and any route with a
// body in its google.api.http option), and only those.
func TestFuzzRoutesComplete(t *testing.T) {
	t.Parallel()
	bindings, err := server.HTTPBindings()
	require.NoError(t, err)
	var want []string
	for _, b := range bindings {
		if b.Body != nil || b.Method == "POST" || b.Method == "PUT" || b.Method == "PATCH" {
			want = append(want, b.Method+" "+b.Path)
		}
	}
	require.NotEmpty(t, want)
	var got []string
	for _, r := range fuzzRoutes {
		got = append(got, r.method+" "+r.template)
		require.Equal(t, r.key, pickRoute(r.key).key)
	}
	slices.Sort(want)
	slices.Sort(got)
	// The traffic routes are fuzzed in every spelling the gateway
	// rewrites onto one binding (trafficFuzzRoutes): a template once.
	got = slices.Compact(got)
	require.Equal(t, want, got, "fuzzRoutes must list every REST route that takes a body")
	for _, s := range fuzzSeeds {
		require.Contains(t, got, pickRoute(s.route).method+" "+pickRoute(s.route).template)
		require.Equal(t, s.route, pickRoute(s.route).key, "seed tagged with an unknown route")
	}
	keys := map[string]bool{}
	for _, s := range fuzzSeeds {
		keys[s.route] = true
	}
	for _, r := range fuzzRoutes {
		require.True(t, keys[r.key], "route %s has no seed", r.key)
	}
}

// TestMakeFuzzRunsEveryTarget: `make fuzz` (FUZZ_TARGETS in the Makefile)
// runs every Fuzz function of the repository, in its package.
func TestMakeFuzzRunsEveryTarget(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	decl := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(f \*testing\.F\)`)
	found := 0
	for _, dir := range []string{"platform", "services"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range decl.FindAllSubmatch(b, -1) {
				rel, err := filepath.Rel(root, filepath.Dir(p))
				require.NoError(t, err)
				require.Contains(t, string(mk), string(m[1])+":./"+filepath.ToSlash(rel)+"/", "FUZZ_TARGETS in the Makefile")
				found++
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, found, 4)
}
