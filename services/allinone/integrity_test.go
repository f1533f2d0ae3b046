package allinone_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
	"github.com/dcm-project/dcm/services/quota"
)

// TestBadInput sends malformed or invalid bodies and paths to every kind
// of resource: each gets 400 naming the field, and nothing is stored.
func TestBadInput(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	registerClusters(t, s, r)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", lc1)
	lc := "/v2/projects/p1/logical-clouds/lc-1"
	lcs := "/v2/projects/p1/logical-clouds"
	perm := func(extra string) string {
		return `{"permission-name":"px","apiGroups":[""],"resources":["pods"],"verbs":["get"]` + extra + `}`
	}

	cases := []struct{ method, path, body, field string }{
		// projects
		{"POST", "/v2/projects", `{"metadata":{"name":"Bad_Name"}}`, "metadata.name"},
		{"POST", "/v2/projects", `{"metadata":{"name":"p2"},"color":"red"}`, "color"},
		{"POST", "/v2/projects", `{"metadata":`, "body"},
		// logical clouds, seed 000 body
		{"POST", lcs, `{"metadata":{"name":"-lc"}}`, "metadata.name"},
		{"POST", lcs, `{"metadata":{"name":"lc-x"},"spec":{"namespace":"NS"}}`, "spec.namespace"},
		{"POST", lcs, `{"metadata":{"name":"lc-x"},"spec":{"level":"9"}}`, "spec.level"},
		{"POST", lcs, `{"metadata":{"name":"lc-x"},"spec":{"user":{"type":"UNPW"}}}`, "spec.user.type"},
		{"POST", lcs, `{"metadata":{"name":"lc-x"},"spec":{"user":{"user-permissions":[` + perm("") + `,{"permission-name":"p2","apiGroups":[""],"resources":["pods"],"verbs":["fly"]}]}}}`, "spec.user.user-permissions[1].verbs[0]"},
		{"POST", lcs, `{"metadata":{"name":"lc-x"},"spec":{"user":{"user-permissions":[{"permission-name":"p","apiGroups":["Not A Group"],"resources":["pods"],"verbs":["get"]}]}}}`, "spec.user.user-permissions[0].apiGroups[0]"},
		{"POST", lcs, `{"metadata":{"name":"lc-x"},"spec":{"user":{"user-permissions":[` + perm("") + `,` + perm("") + `]}}}`, "spec.user.user-permissions[1].permission-name"},
		{"POST", lcs, `{"metadata":{"name":"lc-x"},"spec":{"user":{"user-permissions":[` + perm(`,"namespace":"other"`) + `]}}}`, "spec.user.user-permissions[0].namespace"},
		{"POST", lcs, `{"metadata":{"name":"lc-x"},"spec":{"user":{"certificate":"not a csr"}}}`, "spec.user.certificate"},
		{"POST", lcs, `{"metadata":{"name":"lc-x"},"name":"lc-x"}`, "body"},
		{"POST", lcs, `{"spec":{"namespace":"ns"}}`, "metadata"},
		// logical clouds, seed 002 body
		{"POST", lcs, `{"name":"LC"}`, "name"},
		{"POST", lcs, `{"name":"lc-x","cluster-labels":"edge,not a label"}`, "cluster-labels"},
		{"POST", lcs, `{"name":"lc-x","resources":{"cpu":"lots"}}`, "resources.cpu"},
		{"POST", lcs, `{"name":"lc-x","resources":{"memory":-1}}`, "resources.memory"},
		{"POST", lcs, `{"name":"lc-x","user":[{"name":"u1","quota":{"pods":"-5"}}]}`, "user[0].quota.pods"},
		// below the installation's container defaults (cpu 100m/500m, memory 128Mi/256Mi)
		{"POST", lcs, `{"name":"lc-x","resources":{"limits.memory":"100Mi"}}`, "resources.limits.memory"},
		{"POST", lcs, `{"name":"lc-x","user":[{"name":"u1","quota":{"requests.cpu":"10m"}}]}`, "user[0].quota.requests.cpu"},
		{"POST", lcs, `{"name":"lc-x","user":[{"name":"u1"},{"name":"u1"}]}`, "user[1].name"},
		{"POST", lcs, `{"name":"lc-x","user":{"name":"u1","shoe":"42"}}`, "user[0].shoe"},
		{"POST", lcs, `{"name":"lc-x","user":{"name":"u1","permissions":{"apiGroups":[""],"resources":["pods"],"verbs":"get"}}}`, "user[0].permissions.verbs"},
		{"POST", lcs, `{"name":"lc-x","user":"user-1"}`, "user"},
		// logical cloud update
		{"PUT", lc, `{"metadata":{"name":"lc-2"}}`, "metadata.name"},
		{"PUT", lc, `{"metadata":{"name":"lc-1"},"spec":{"level":"admin"}}`, "spec.level"},
		{"PUT", lc, `{"metadata":{"name":"lc-1"},"spec":{"user":{"user-name":"someone"}}}`, "spec.user.user-name"},
		// cluster references
		{"POST", lc + "/cluster-references", `{"cluster-provider":"edge","cluster-name":"c1","loadbalancer-ip":"999.1.1.1"}`, "loadbalancer-ip"},
		{"POST", lc + "/cluster-references", `{"cluster-provider":"edge","cluster-name":"nope"}`, "cluster-name"},
		{"POST", lc + "/cluster-references", `{"cluster-provider":"Edge","cluster-name":"c1"}`, "cluster-provider"},
		{"POST", lc + "/cluster-providers/edge/cluster-references", `{"cluster-name":"C1"}`, "cluster-name"},
		{"PUT", lc + "/cluster-providers/edge/cluster-references/c1", `{"loadbalancer-ip":"not-an-ip"}`, "loadbalancer-ip"},
		// user permissions
		{"POST", lc + "/user-permissions", `{"permission-name":"p","apiGroups":[""],"resources":["pods"],"verbs":[]}`, "verbs"},
		{"POST", lc + "/user-permissions", `{"permission-name":"p","apiGroups":[],"resources":["pods"],"verbs":["get"]}`, "apiGroups"},
		{"POST", lc + "/user-permissions", `{"permission-name":"p","apiGroups":[""],"resources":["Pods!"],"verbs":["get"]}`, "resources[0]"},
		{"POST", lc + "/user-permissions", `{"permission-name":"p","apiGroups":[""],"resources":["pods"],"verbs":["get"],"namespace":"kube-system"}`, "namespace"},
		{"POST", lc + "/user-permissions", `{"permission-name":"P","apiGroups":[""],"resources":["pods"],"verbs":["get"]}`, "permission-name"},
		{"PUT", lc + "/user-permissions/permission-1", perm(""), "permission-name"},
		// quotas
		{"POST", lc + "/cluster-quotas", `{"metadata":{"name":"q"},"spec":{"cpu":"1x"}}`, "spec.cpu"},
		{"POST", lc + "/cluster-quotas", `{"metadata":{"name":"q"},"spec":{"requests.nvidia.com/gpu":true}}`, "spec.requests.nvidia.com/gpu"},
		{"POST", lc + "/cluster-quotas", `{"metadata":{"name":"q"},"spec":{"not a resource":"1"}}`, "spec.not a resource"},
		{"POST", lc + "/cluster-quotas", `{"metadata":{"name":"Q"},"spec":{"cpu":"1"}}`, "metadata.name"},
		{"POST", lc + "/cluster-quotas", `{"metadata":{"name":"q"},"spec":{"cpu":"1"},"hard":{}}`, "hard"},
		{"POST", lc + "/cluster-quotas", `{"metadata":{"name":"q"},"spec":{"limits.memory":"100Mi"}}`, "spec.limits.memory"},
		{"PUT", lc + "/cluster-quotas/default", `{"metadata":{"name":"default"},"spec":{"cpu":"50m"}}`, "spec.cpu"},
		// container defaults
		{"PUT", lc + "/container-defaults", `{"default":{"cpu":"x"}}`, "default.cpu"},
		{"PUT", lc + "/container-defaults", `{"default":{"ephemeral-storage":"1Gi"}}`, "default.ephemeral-storage"},
		{"PUT", lc + "/container-defaults", `{"default":{"memory":"40Gi"},"default-request":{"memory":"40Gi"}}`, "default-request.memory"},
		{"PUT", lc + "/container-defaults", `{"default-request":{"cpu":"1"}}`, "default-request.cpu"},
		{"PUT", lc + "/container-defaults", `{"default":{"cpu":0}}`, "default.cpu"},
		// kv pairs
		{"POST", lc + "/kv-pairs", `{"metadata":{"name":"kv"},"spec":{"kv":[{"a":"1","b":"2"}]}}`, "spec.kv[0]"},
		{"POST", lc + "/kv-pairs", `{"metadata":{"name":"kv"},"spec":{"kv":[{"a":1}]}}`, "spec.kv[0].a"},
		{"POST", lc + "/kv-pairs", `{"metadata":{"name":"kv"},"spec":{"kv":[{"a":"1"},{"a":"2"}]}}`, "spec.kv[1]"},
		{"POST", lc + "/kv-pairs", `{"metadata":{"name":"kv","userData1":` + `"` + strings.Repeat("x", 5000) + `"}}`, "metadata.userData1"},
		{"POST", lcs, `{"metadata":{"name":"lc-x"},"spec":{"user":{"type":"token","certificate":"x"}}}`, "spec.user.certificate"},
		// lifecycle
		{"POST", lcs + "/Bad_LC/apply", "", "logical-cloud"},
		{"GET", lcs + "/Bad_LC/status", "", "logical-cloud"},
		{"GET", lc + "/cluster-references/Bad_C/kubeconfig", "", "cluster-name"},
		{"GET", lc + "/cluster-references/c1/kubeconfig?user=Bad_U", "", "user"},
		{"GET", lc + "/cluster-providers/E/cluster-references/c1/kubeconfig", "", "cluster-provider"},
		// cluster registry
		{"POST", "/v2/cluster-providers/edge/clusters", `{"metadata":{"name":"c9"},"spec":{"kubeconfig":"not yaml: ["}}`, "spec.kubeconfig"},
		{"POST", "/v2/cluster-providers/edge/clusters", `{"metadata":{"name":"c9"},"spec":{"labels":["edge"]}}`, "spec.kubeconfig"},
	}
	require.GreaterOrEqual(t, len(cases), 30)

	// Everything readable before, to compare after.
	reads := []string{"/v2/projects", lcs, lc + "/cluster-references", lc + "/user-permissions", lc + "/users",
		lc + "/namespaces", lc + "/cluster-quotas", lc + "/container-defaults", lc + "/kv-pairs", "/v2/cluster-providers/edge/clusters"}
	snapshot := func() map[string]string {
		out := map[string]string{}
		for _, p := range reads {
			out[p] = r.Want(200, "GET", p, "")
		}
		return out
	}
	before := snapshot()
	for _, c := range cases {
		got, body := apitest.Call(t, s.Admin, c.method, s.URL+c.path, c.body)
		require.Equal(t, 400, got, "%s %s %s: %s", c.method, c.path, c.body, body)
		var e struct{ Field, Message string }
		require.NoError(t, json.Unmarshal(body, &e))
		require.Equal(t, c.field, e.Field, "%s %s %s: %s", c.method, c.path, c.body, body)
		require.NotEmpty(t, e.Message)
	}
	require.Equal(t, before, snapshot(), "nothing was stored")
	r.Want(404, "GET", lcs+"/lc-x", "")
}

// TestParentsMustExist: every sub-resource of a missing project or
// logical cloud is 404, in every service.
func TestParentsMustExist(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	for _, lc := range []string{"/v2/projects/nope/logical-clouds/lc-1", "/v2/projects/p1/logical-clouds/nope"} {
		for _, c := range []struct{ method, sub, body string }{
			{"GET", "", ""}, {"PUT", "", `{"metadata":{"name":"` + lc[strings.LastIndex(lc, "/")+1:] + `"}}`}, {"DELETE", "", ""},
			{"GET", "/cluster-references", ""}, {"POST", "/cluster-references", `{"cluster-provider":"edge","cluster-name":"c1"}`},
			{"GET", "/cluster-providers/edge/cluster-references", ""}, {"GET", "/cluster-providers/edge/cluster-references/c1", ""},
			{"GET", "/user-permissions", ""}, {"POST", "/user-permissions", `{"permission-name":"p","apiGroups":[""],"resources":["pods"],"verbs":["get"]}`},
			{"GET", "/user-permissions/p", ""}, {"DELETE", "/user-permissions/p", ""},
			{"GET", "/users", ""}, {"DELETE", "/users", ""}, {"GET", "/user/u", ""}, {"DELETE", "/user/u", ""},
			{"GET", "/namespaces", ""}, {"DELETE", "/namespaces", ""},
			{"GET", "/cluster-quotas", ""}, {"POST", "/cluster-quotas", `{"metadata":{"name":"q"},"spec":{"cpu":"1"}}`}, {"GET", "/cluster-quotas/default", ""},
			{"GET", "/kv-pairs", ""}, {"POST", "/kv-pairs", `{"metadata":{"name":"kv"}}`},
		} {
			r.Want(404, c.method, lc+c.sub, c.body)
		}
	}
	r.Want(404, "GET", "/v2/projects/nope/logical-clouds", "")
	r.Want(404, "POST", "/v2/projects/nope/logical-clouds", `{"metadata":{"name":"lc-1"}}`)
}

// TestConcurrentWrites: 50 distinct permissions posted at once all land;
// 20 creates of one name give one 201 and nineteen 409s.
func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", `{"metadata":{"name":"lc-1"}}`)
	lc := "/v2/projects/p1/logical-clouds/lc-1"

	parallel := func(n int, req func(i int) (string, string, string)) map[int]int {
		var mu sync.Mutex
		codes := map[int]int{}
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, p, b := req(i)
				got, body := apitest.Call(t, s.Admin, m, s.URL+p, b)
				if got != 201 && got != 409 && got != 200 && got != 202 {
					t.Errorf("%s %s: %d %s", m, p, got, body)
				}
				mu.Lock()
				codes[got]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		return codes
	}
	got := parallel(50, func(i int) (string, string, string) {
		return "POST", lc + "/user-permissions", fmt.Sprintf(`{"permission-name":"perm-%02d","apiGroups":[""],"resources":["pods"],"verbs":["get"]}`, i)
	})
	require.Equal(t, map[int]int{201: 50}, got)
	var perms []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/user-permissions", "")), &perms))
	require.Len(t, perms, 50, "every permission landed")

	for _, path := range []string{lc + "/user-permissions", lc + "/kv-pairs", lc + "/cluster-quotas", "/v2/projects/p1/logical-clouds"} {
		body := map[string]string{
			lc + "/user-permissions":         `{"permission-name":"same","apiGroups":[""],"resources":["pods"],"verbs":["get"]}`,
			lc + "/kv-pairs":                 `{"metadata":{"name":"same"}}`,
			lc + "/cluster-quotas":           `{"metadata":{"name":"same"},"spec":{"cpu":"1"}}`,
			"/v2/projects/p1/logical-clouds": `{"metadata":{"name":"same"}}`,
		}[path]
		got := parallel(20, func(int) (string, string, string) { return "POST", path, body })
		require.Equal(t, map[int]int{201: 1, 409: 19}, got, path)
	}

	// Concurrent updates of one record: each is a read and a write
	// conditional on the version read, so each either wins (200) or is
	// told it lost (409); the record ends as one winner wrote it.
	got = parallel(20, func(i int) (string, string, string) {
		return "PUT", lc + "/kv-pairs/same", fmt.Sprintf(`{"metadata":{"name":"same","description":"writer-%02d"}}`, i)
	})
	require.Positive(t, got[200])
	require.Equal(t, 20, got[200]+got[409], "%v", got)
	require.Contains(t, r.Want(200, "GET", lc+"/kv-pairs/same", ""), "writer-")

	// Concurrent lifecycle calls: one apply wins, the others are told the
	// state that forbids them. (The clusters are unreachable: the rollout
	// retries, which is all this needs.)
	registerClusters(t, s, r)
	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"c1"}`)
	got = parallel(6, func(int) (string, string, string) { return "POST", lc + "/apply", "" })
	require.Equal(t, map[int]int{202: 1, 409: 5}, got)
	r.Want(200, "PUT", lc, `{"metadata":{"name":"lc-1","description":"edited while applying"}}`)
	var st struct {
		State      string `json:"state"`
		Generation int64  `json:"generation,string"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/status", "")), &st))
	require.Equal(t, "Instantiating", st.State)
	applied := st.Generation
	// The logical cloud's GET speaks the status's words: the phase asked
	// for, and the state now.
	require.Regexp(t, `"lifecycle":\{"phase":"Instantiated",.*"state":"Instantiat(ing|ed)"[,}]`, r.Want(200, "GET", lc, ""))
	// Concurrent terminates: one wins; the others find it already being
	// terminated (409), and the rollout's deletion is asked for once.
	got = parallel(6, func(int) (string, string, string) { return "POST", lc + "/terminate", "" })
	require.Equal(t, map[int]int{202: 1, 409: 5}, got)
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/status", "")), &st))
	require.Equal(t, "Terminating", st.State)
	require.Equal(t, applied+1, st.Generation, "one deletion")
	require.Contains(t, r.Want(409, "POST", lc+"/apply", ""), "is Terminating")
}

// TestCascadeRetriesWhileServiceIsDown runs the quota service as its own
// program, stops it, deletes a logical cloud, and brings it back: the
// logical cloud is gone for readers at once, its name stays taken until
// its quotas are removed, and the cleanup loop removes them once the quota
// service is back.
func TestCascadeRetriesWhileServiceIsDown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts programs")
	}
	dataDir := t.TempDir()
	if _, err := pki.Bootstrap(filepath.Join(dataDir, "pki"), pki.DefaultHosts()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	quotaAddr := ln.Addr().String()
	require.NoError(t, ln.Close())
	s := stacktest.StartWith(t, stacktest.Options{DataDir: dataDir, Args: []string{"-quota-addr", quotaAddr, "-cleanup-interval", "200ms"}})

	quotaDir := t.TempDir()
	startQuota := func() (stop func()) {
		files := pki.LocalFiles(filepath.Join(dataDir, "pki"))
		ctx, cancel := context.WithCancel(context.Background())
		p, err := app.Start(ctx, quota.Name, []string{
			"-grpc-addr", quotaAddr, "-http-addr", "", "-data-dir", quotaDir, "-log-level", "error",
			"-tls-ca-file", files.CA, "-tls-cert-file", files.Cert, "-tls-key-file", files.Key,
			"-kek-file", filepath.Join(dataDir, "kek"),
		}, true, quota.Build)
		if err != nil {
			cancel()
			t.Fatalf("start quota: %v", err)
		}
		return func() {
			cancel()
			require.NoError(t, p.Wait())
		}
	}
	stopQuota := startQuota()

	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", `{"name":"lc-1","resources":{"cpu":"4"}}`)
	lc := "/v2/projects/p1/logical-clouds/lc-1"
	require.Contains(t, r.Want(200, "GET", lc+"/cluster-quotas", ""), `"resources"`)

	stopQuota()
	r.Want(503, "GET", lc+"/cluster-quotas", "")
	r.Want(204, "DELETE", lc, "")
	r.Want(404, "GET", lc, "")
	r.Is(200, "GET", "/v2/projects/p1/logical-clouds", "", `[]`)
	require.Contains(t, r.Want(409, "POST", "/v2/projects/p1/logical-clouds", `{"metadata":{"name":"lc-1"}}`), "still being deleted")
	require.Contains(t, r.Want(409, "DELETE", "/v2/projects/p1", ""), "lc-1", "the project waits for the removal too")
	time.Sleep(time.Second) // several cleanup rounds fail meanwhile
	r.Want(409, "POST", "/v2/projects/p1/logical-clouds", `{"metadata":{"name":"lc-1"}}`)

	defer startQuota()()
	require.Eventually(t, func() bool {
		code, _ := apitest.Call(t, s.Admin, "POST", s.URL+"/v2/projects/p1/logical-clouds", `{"metadata":{"name":"lc-1"}}`)
		return code == 201
	}, 20*time.Second, 100*time.Millisecond, "the removal completes once the quota service is back")
	var quotas []map[string]any
	require.Eventually(t, func() bool { // the gateway's own connection may still be backing off
		code, _ := apitest.Call(t, s.Admin, "GET", s.URL+lc+"/cluster-quotas", "")
		return code == 200
	}, 10*time.Second, 100*time.Millisecond)
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/cluster-quotas", "")), &quotas))
	require.Len(t, quotas, 1)
	require.Equal(t, "default", quotas[0]["metadata"].(map[string]any)["name"], "the old logical cloud's quota did not outlive it")
}
