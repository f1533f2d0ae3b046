package allinone_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// registerClusters makes provider "edge" with clusters c1 (edge, sriov),
// c2 (edge) and c3 (core).
func registerClusters(t *testing.T, s *stacktest.Stack, r *apitest.REST) {
	t.Helper()
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
	for name, labels := range map[string]string{"c1": `["edge","sriov"]`, "c2": `["edge"]`, "c3": `["core"]`} {
		// Loopback, where nothing listens: a call that reaches for the
		// cluster is refused here, and nothing is resolved or sent off
		// the machine.
		kc, _ := kubeconfig(t, s.CA, "https://127.0.0.1:1/"+name)
		body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": name},
			"spec": map[string]any{"kubeconfig": kc, "labels": json.RawMessage(labels)}})
		require.NoError(t, err)
		r.Want(201, "POST", "/v2/cluster-providers/edge/clusters", string(body))
	}
}

const lc1 = `{
  "metadata": {"name": "lc-1", "description": "logical cloud for walmart finance department", "userData1": "a", "userData2": "b"},
  "spec": {
    "namespace": "ns-1",
    "user": {
      "user-name": "user-1",
      "type": "certificate",
      "user-permissions": [
        {"permission-name": "permission-1", "apiGroups": ["stable.example.com"], "resources": ["secrets", "pods"], "verbs": ["get", "watch", "list", "create"]},
        {"permission-name": "permission-2", "apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}
      ]
    }
  }
}`

// TestLogicalCloudSeedSequence is the seed pages' whole sequence over
// REST: a project, clusters with labels, a logical cloud, its cluster
// references (both spellings), permissions, quotas and kv-pairs, read
// back, updated and deleted, with the integrity rules along the way.
func TestLogicalCloudSeedSequence(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	registerClusters(t, s, r)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	lc := "/v2/projects/p1/logical-clouds/lc-1"

	// The permissions it was created with are the user service's records
	// (.../user-permissions); its answers show them where it was told them.
	perms := `[
		{"permission-name":"permission-1","namespace":"ns-1","apiGroups":["stable.example.com"],"resources":["secrets","pods"],"verbs":["get","watch","list","create"],"metadata":null,"users":[]},
		{"permission-name":"permission-2","namespace":"ns-1","apiGroups":[""],"resources":["configmaps"],"verbs":["*"],"metadata":null,"users":[]}]`
	showing := func(perms string) string {
		return `{"metadata":{"name":"lc-1","description":"logical cloud for walmart finance department","userData1":"a","userData2":"b"},
		"spec":{"namespace":"ns-1","level":"standard","user":{"user-name":"user-1","type":"certificate","user-permissions":` + perms + `,"certificate":""},"cluster-labels":[],"labels":[],"pod-security":"baseline","service-mesh":null,"rollout":null,"ca-root":"","allow-ingress-from":[],"users":["user-1"]},
		"lifecycle":{"phase":"Created","generation":"0","changed":null,"state":"Created","labelled-clusters":[],"label-changes":[]}}`
	}
	stored := showing(perms)
	r.Is(201, "POST", "/v2/projects/p1/logical-clouds", lc1, `{"name":"lc-1","logical-cloud-name":"lc-1","namespace":"ns-1","user-name":"user-1",
		"user":"user-1","message":"logical cloud and associated user successfully created","logical-cloud":`+stored+`}`)
	r.Want(409, "POST", "/v2/projects/p1/logical-clouds", lc1)
	r.Is(200, "GET", lc, "", stored)
	r.Is(200, "GET", "/v2/projects/p1/logical-clouds", "", "["+stored+"]")

	// What the other services made of it.
	r.Is(200, "GET", lc+"/namespaces", "", `{"clusters":[],"namespaces":[{"name":"ns-1","labels":{"dcm.io/project":"p1","dcm.io/logical-cloud":"lc-1"}}]}`)
	// A user is shown with the permissions it holds (those naming no
	// user are every user's) and its quota (none here).
	user1 := `{"name":"user-1","type":"certificate","certificate":"","permissions":` + perms + `,"quota":null}`
	r.Is(200, "GET", lc+"/users", "", `{"users":[`+user1+`],"next-page-token":""}`)
	r.Is(200, "GET", lc+"/user/user-1", "", user1)
	r.Is(200, "GET", lc+"/users/user-1", "", user1)
	r.Is(200, "GET", lc+"/user-permissions", "", perms)

	// Cluster references, both spellings.
	r.Is(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"c1","loadbalancer-ip":"0.0.0.0"}`,
		`{"cluster-provider":"edge","cluster-name":"c1","loadbalancer-ip":"0.0.0.0","metadata":{"name":"c1","description":"","userData1":"","userData2":""}}`)
	r.Is(201, "POST", lc+"/cluster-providers/edge/cluster-references", `{"cluster-name":"c2"}`,
		`{"cluster-provider":"edge","cluster-name":"c2","loadbalancer-ip":"","metadata":{"name":"c2","description":"","userData1":"","userData2":""}}`)
	r.Want(409, "POST", lc+"/cluster-providers/edge/cluster-references", `{"cluster-name":"c2"}`)
	r.Is(200, "PUT", lc+"/cluster-providers/edge/cluster-references/c2", `{"loadbalancer-ip":"10.0.0.2"}`,
		`{"cluster-provider":"edge","cluster-name":"c2","loadbalancer-ip":"10.0.0.2","metadata":{"name":"c2","description":"","userData1":"","userData2":""}}`)
	refs := `{"cluster-references":[{"cluster-provider":"edge","cluster-name":"c1","loadbalancer-ip":"0.0.0.0","metadata":{"name":"c1","description":"","userData1":"","userData2":""}},
		{"cluster-provider":"edge","cluster-name":"c2","loadbalancer-ip":"10.0.0.2","metadata":{"name":"c2","description":"","userData1":"","userData2":""}}],"next-page-token":""}`
	r.Is(200, "GET", lc+"/cluster-references", "", refs)
	r.Is(200, "GET", lc+"/cluster-providers/edge/cluster-references", "", refs)
	r.Is(200, "GET", lc+"/cluster-providers/other/cluster-references", "", `{"cluster-references":[],"next-page-token":""}`)
	r.Is(200, "GET", lc+"/cluster-providers/edge/cluster-references/c1", "", `{"cluster-provider":"edge","cluster-name":"c1","loadbalancer-ip":"0.0.0.0","metadata":{"name":"c1","description":"","userData1":"","userData2":""}}`)
	r.Is(200, "GET", lc+"/namespaces", "", `{"clusters":["edge/c1","edge/c2"],"namespaces":[{"name":"ns-1","labels":{"dcm.io/project":"p1","dcm.io/logical-cloud":"lc-1"}}]}`)
	body := r.Want(409, "DELETE", "/v2/cluster-providers/edge/clusters/c1", "")
	require.Contains(t, body, "p1/lc-1", "the refusal names the logical cloud")
	r.Want(200, "GET", "/v2/cluster-providers/edge/clusters/c1", "")
	r.Want(204, "DELETE", lc+"/cluster-providers/edge/cluster-references/c2", "")
	r.Want(404, "GET", lc+"/cluster-providers/edge/cluster-references/c2", "")

	// Quotas: the default until the logical cloud has its own.
	def := `{"metadata":{"name":"default","description":"the default quota: applies while the logical cloud has no quota of its own (DCM_DEFAULT_QUOTA)","userData1":"","userData2":""},
		"spec":{"cpu":"8","memory":"32Gi","pods":"100"}` + quotaTail("default", "") + `}`
	r.Is(200, "GET", lc+"/cluster-quotas", "", "["+def+"]")
	r.Is(200, "GET", lc+"/cluster-quotas/default", "", def)
	r.Want(409, "DELETE", lc+"/cluster-quotas/default", "")
	q1 := `{"metadata":{"name":"q1","description":"","userData1":"","userData2":""},
		"spec":{"cpu":"400","memory":"1000Gi","pods":"500","limits.cpu":"2000m","requests.nvidia.com/gpu":2,"dummy/dummyResource":100}}`
	q1Stored := `{"metadata":{"name":"q1","description":"","userData1":"","userData2":""},
		"spec":{"cpu":"400","memory":"1000Gi","pods":"500","limits.cpu":"2","requests.nvidia.com/gpu":"2","dummy/dummyResource":"100"}` + quotaTail("q1", "") + `}`
	r.Is(201, "POST", lc+"/cluster-quotas", q1, q1Stored)
	r.Is(200, "GET", lc+"/cluster-quotas", "", "["+q1Stored+"]")
	r.Want(404, "GET", lc+"/cluster-quotas/default", "")
	r.Is(200, "PUT", lc+"/cluster-quotas/q1", `{"metadata":{"name":"q1","description":"tuned"},"spec":{"cpu":"200"}}`,
		`{"metadata":{"name":"q1","description":"tuned","userData1":"","userData2":""},"spec":{"cpu":"200"}`+quotaTail("q1", "")+`}`)
	r.Is(200, "GET", lc+"/cluster-quotas/q1", "", `{"metadata":{"name":"q1","description":"tuned","userData1":"","userData2":""},"spec":{"cpu":"200"}`+quotaTail("q1", "")+`}`)

	// Permissions.
	perm := `{"permission-name":"permission-3","apiGroups":["apps"],"resources":["deployments","deployments/scale"],"verbs":["get","patch"]}`
	r.Is(201, "POST", lc+"/user-permissions", perm,
		`{"permission-name":"permission-3","namespace":"ns-1","apiGroups":["apps"],"resources":["deployments","deployments/scale"],"verbs":["get","patch"],"metadata":null,"users":[]}`)
	r.Is(200, "PUT", lc+"/user-permissions/permission-3", `{"permission-name":"permission-3","apiGroups":[""],"resources":["pods"],"verbs":["list"]}`,
		`{"permission-name":"permission-3","namespace":"ns-1","apiGroups":[""],"resources":["pods"],"verbs":["list"],"metadata":null,"users":[]}`)
	r.Is(200, "GET", lc+"/user-permissions/permission-3", "", `{"permission-name":"permission-3","namespace":"ns-1","apiGroups":[""],"resources":["pods"],"verbs":["list"],"metadata":null,"users":[]}`)
	// The logical cloud shows its permissions now, ordered by name.
	perms3 := strings.TrimSuffix(perms, "]") +
		`,{"permission-name":"permission-3","namespace":"ns-1","apiGroups":[""],"resources":["pods"],"verbs":["list"],"metadata":null,"users":[]}]`
	r.Is(200, "GET", lc, "", showing(perms3))
	r.Is(200, "GET", "/v2/projects/p1/logical-clouds", "", "["+showing(perms3)+"]")
	// A GET's body sent back is accepted and changes nothing, in any
	// order and with a namespace left to its default; other permissions
	// are refused: they change at .../user-permissions.
	r.Is(200, "PUT", lc, r.Want(200, "GET", lc, ""), showing(perms3)) // its lifecycle is output only: ignored
	reordered := `{"metadata":{"name":"lc-1","description":"logical cloud for walmart finance department","userData1":"a","userData2":"b"},
		"spec":{"user":{"user-permissions":[
		{"permission-name":"permission-3","apiGroups":[""],"resources":["pods"],"verbs":["list"]},
		{"permission-name":"permission-2","namespace":"ns-1","apiGroups":[""],"resources":["configmaps"],"verbs":["*"]},
		{"permission-name":"permission-1","apiGroups":["stable.example.com"],"resources":["secrets","pods"],"verbs":["get","watch","list","create"]}]}}}`
	r.Is(200, "PUT", lc, reordered, showing(perms3))
	for name, changed := range map[string]string{
		"a verb":            strings.Replace(reordered, `"verbs":["list"]`, `"verbs":["get"]`, 1),
		"a permission less": strings.Replace(reordered, `{"permission-name":"permission-3","apiGroups":[""],"resources":["pods"],"verbs":["list"]},`, "", 1),
		"a permission more": strings.Replace(reordered, `{"permission-name":"permission-3"`, `{"permission-name":"permission-4","apiGroups":[""],"resources":["pods"],"verbs":["get"]},{"permission-name":"permission-3"`, 1),
		"another name":      strings.Replace(reordered, `"permission-3"`, `"permission-4"`, 1),
		"its API groups":    strings.Replace(reordered, `"apiGroups":[""],"resources":["pods"]`, `"apiGroups":["apps"],"resources":["pods"]`, 1),
		"its resources":     strings.Replace(reordered, `"resources":["pods"]`, `"resources":["pods","pods/log"]`, 1),
		"another namespace": strings.Replace(reordered, `"namespace":"ns-1"`, `"namespace":"ns-2"`, 1),
	} {
		require.NotEqual(t, reordered, changed, name)
		body := r.Want(400, "PUT", lc, changed)
		require.Contains(t, body, `"field":"spec.user.user-permissions"`, name)
		require.Contains(t, body, ".../user-permissions", name)
	}
	r.Is(200, "GET", lc, "", showing(perms3))
	r.Want(204, "DELETE", lc+"/user-permissions/permission-3", "")
	r.Want(404, "GET", lc+"/user-permissions/permission-3", "")
	r.Is(200, "GET", lc, "", stored)

	// Key-value pairs; keys may hold dots.
	kv := `{"metadata":{"name":"kv1","description":"settings","userData1":"u1","userData2":"u2"},"spec":{"kv":[{"db.host":"10.0.0.9"},{"mode":"edge"}]}}`
	r.Is(201, "POST", lc+"/kv-pairs", kv, kv)
	r.Is(200, "GET", lc+"/kv-pairs/kv1", "", kv)
	kv2 := `{"metadata":{"name":"kv1","description":"","userData1":"","userData2":""},"spec":{"kv":[{"mode":"core"}]}}`
	r.Is(200, "PUT", lc+"/kv-pairs/kv1", kv2, kv2)
	r.Is(200, "GET", lc+"/kv-pairs", "", "["+kv2+"]")

	// The logical cloud itself: metadata changes, what was fixed does not.
	r.Is(200, "PUT", lc, `{"metadata":{"name":"lc-1","description":"payroll"},"spec":{"namespace":"ns-1","level":"standard"}}`,
		strings.Replace(strings.Replace(stored, "logical cloud for walmart finance department", "payroll", 1), `"userData1":"a","userData2":"b"`, `"userData1":"","userData2":""`, 1))
	body = r.Want(400, "PUT", lc, `{"metadata":{"name":"lc-1"},"spec":{"namespace":"ns-2"}}`)
	require.Contains(t, body, `"field":"spec.namespace"`)

	// Deleting the project is refused while it has a logical cloud.
	body = r.Want(409, "DELETE", "/v2/projects/p1", "")
	require.Contains(t, body, "lc-1")
	require.Contains(t, body, `"reason":"REFERENCED"`)

	// Delete: everything under it goes, in every service.
	r.Want(204, "DELETE", lc, "")
	for _, sub := range []string{"", "/namespaces", "/users", "/user/user-1", "/user-permissions", "/cluster-quotas", "/cluster-references", "/kv-pairs", "/kv-pairs/kv1"} {
		r.Want(404, "GET", lc+sub, "")
	}
	r.Want(204, "DELETE", "/v2/cluster-providers/edge/clusters/c1", "")
	// A new logical cloud of the same name starts empty: nothing of the
	// old one was left behind.
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", `{"metadata":{"name":"lc-1"}}`)
	r.Is(200, "GET", lc+"/user-permissions", "", `[]`)
	r.Is(200, "GET", lc+"/kv-pairs", "", `[]`)
	r.Is(200, "GET", lc+"/cluster-references", "", `{"cluster-references":[],"next-page-token":""}`)
	r.Is(200, "GET", lc+"/users", "", `{"users":[{"name":"lc-1","type":"certificate","certificate":"","permissions":[],"quota":null}],"next-page-token":""}`)
	r.Is(200, "GET", lc+"/cluster-quotas", "", "["+def+"]")
	r.Want(204, "DELETE", lc, "")
	r.Want(204, "DELETE", "/v2/projects/p1", "")
}

// TestLogicalCloudFlatBody creates logical clouds from seed 002's flat
// body: clusters picked by labels, the quota from resources, users (one
// object or a list) with their own permissions and quotas.
func TestLogicalCloudFlatBody(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	registerClusters(t, s, r)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	flat := `{"name": "logical-cloud-1", "description": "logical cloud for walmart finance department",
	  "cluster-labels": "edge,sriov",
	  "resources": {"cpu": "400", "memory": "1000Gi", "pods": "500", "dummy/dummyResource": 100},
	  "user": [{"name": "user-1", "type": "certificate",
	            "permissions": {"apiGroups": ["stable.example.com"], "resources": ["secrets", "pods"], "verbs": ["get", "watch", "list", "create"]},
	            "quota": {"cpu": "100", "memory": "500Gi", "pods": "100", "dummy/dummyResource": 20}},
	           {"name": "user-2", "type": "certificate",
	            "permissions": {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}}]}`
	// The logical cloud's answers show every user's permissions, each
	// naming the one user it is granted to.
	flatStored := `{"metadata":{"name":"logical-cloud-1","description":"logical cloud for walmart finance department","userData1":"","userData2":""},
		"spec":{"namespace":"logical-cloud-1","level":"standard","user":{"user-name":"user-1","type":"certificate","user-permissions":[
		{"permission-name":"user-1","namespace":"logical-cloud-1","apiGroups":["stable.example.com"],"resources":["secrets","pods"],"verbs":["get","watch","list","create"],"metadata":null,"users":["user-1"]},
		{"permission-name":"user-2","namespace":"logical-cloud-1","apiGroups":[""],"resources":["configmaps"],"verbs":["*"],"metadata":null,"users":["user-2"]}],"certificate":""},"cluster-labels":["edge","sriov"],"labels":[],"pod-security":"baseline","service-mesh":null,"rollout":null,"ca-root":"","allow-ingress-from":[],"users":["user-1","user-2"]},
		"lifecycle":{"phase":"Created","generation":"0","changed":null,"state":"Created","labelled-clusters":["edge/c1"],"label-changes":[]}}`
	r.Is(201, "POST", "/v2/projects/p1/logical-clouds", flat, `{"name":"logical-cloud-1","logical-cloud-name":"logical-cloud-1","namespace":"logical-cloud-1",
		"user-name":"user-1","user":"user-1","message":"logical cloud and associated user successfully created","logical-cloud":`+flatStored+`}`)
	lc := "/v2/projects/p1/logical-clouds/logical-cloud-1"
	r.Is(200, "GET", lc, "", flatStored)
	r.Is(200, "GET", lc+"/cluster-references", "", `{"cluster-references":[{"cluster-provider":"edge","cluster-name":"c1","loadbalancer-ip":"","metadata":{"name":"c1","description":"","userData1":"","userData2":""}}],"next-page-token":""}`)
	// Seed 002's answer: each user with its own permissions and quota.
	r.Is(200, "GET", lc+"/users", "", `{"users":[
		{"name":"user-1","type":"certificate","certificate":"","permissions":[
			{"permission-name":"user-1","namespace":"logical-cloud-1","apiGroups":["stable.example.com"],"resources":["secrets","pods"],"verbs":["get","watch","list","create"],"metadata":null,"users":["user-1"]}],
		 "quota":{"cpu":"100","memory":"500Gi","pods":"100","dummy/dummyResource":"20"}},
		{"name":"user-2","type":"certificate","certificate":"","permissions":[
			{"permission-name":"user-2","namespace":"logical-cloud-1","apiGroups":[""],"resources":["configmaps"],"verbs":["*"],"metadata":null,"users":["user-2"]}],
		 "quota":null}],"next-page-token":""}`)
	r.Is(200, "GET", lc+"/user-permissions", "", `[
		{"permission-name":"user-1","namespace":"logical-cloud-1","apiGroups":["stable.example.com"],"resources":["secrets","pods"],"verbs":["get","watch","list","create"],"metadata":null,"users":["user-1"]},
		{"permission-name":"user-2","namespace":"logical-cloud-1","apiGroups":[""],"resources":["configmaps"],"verbs":["*"],"metadata":null,"users":["user-2"]}]`)
	r.Is(200, "GET", lc+"/cluster-quotas", "", `[
		{"metadata":{"name":"resources","description":"the logical cloud's resources","userData1":"","userData2":""},"spec":{"cpu":"400","memory":"1000Gi","pods":"500","dummy/dummyResource":"100"}`+quotaTail("resources", "")+`},
		{"metadata":{"name":"user-1-quota","description":"quota of user user-1","userData1":"","userData2":""},"spec":{"cpu":"100","memory":"500Gi","pods":"100","dummy/dummyResource":"20"}`+quotaTail("user-1-quota", "user-1")+`}]`)

	// One user object, as seed 002's second example writes it.
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", `{"name":"lc-2","user":{"name":"user-9","permissions":{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}}}`)
	r.Is(200, "GET", "/v2/projects/p1/logical-clouds/lc-2/users", "", `{"users":[{"name":"user-9","type":"certificate","certificate":"","permissions":[
		{"permission-name":"user-9","namespace":"lc-2","apiGroups":[""],"resources":["pods"],"verbs":["get"],"metadata":null,"users":["user-9"]}],"quota":null}],"next-page-token":""}`)
	// A user's CSR (its text) is kept; a path is refused.
	csr := csrPEM(t, "p1", "lc-3", "user-7")
	b, err := json.Marshal(map[string]any{"name": "lc-3", "user": map[string]any{"name": "user-7", "certificate": csr}})
	require.NoError(t, err)
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", string(b))
	require.Contains(t, r.Want(200, "GET", "/v2/projects/p1/logical-clouds/lc-3/user/user-7", ""), "BEGIN CERTIFICATE REQUEST")
	require.Contains(t, r.Want(400, "POST", "/v2/projects/p1/logical-clouds", `{"name":"lc-4","user":{"name":"u","certificate":"/path/to/user1/lc-1-user1.csr"}}`),
		`"field":"user[0].certificate"`)
	r.Want(404, "GET", "/v2/projects/p1/logical-clouds/lc-4", "")
}

// TestLogicalCloudLevels: an admin logical cloud has no user, namespace
// or quota; a privileged one's permissions may be cluster-wide; a standard
// one's stay in its namespace.
func TestLogicalCloudLevels(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	base := "/v2/projects/p1/logical-clouds"

	adminStored := `{"metadata":{"name":"admin-lc","description":"","userData1":"","userData2":""},
		"spec":{"namespace":"","level":"admin","user":null,"cluster-labels":[],"labels":[],"pod-security":"","service-mesh":null,"rollout":null,"ca-root":"","allow-ingress-from":[],"users":[]},
		"lifecycle":{"phase":"Created","generation":"0","changed":null,"state":"Created","labelled-clusters":[],"label-changes":[]}}`
	r.Is(201, "POST", base, `{"metadata":{"name":"admin-lc"},"spec":{"level":"0"}}`,
		`{"name":"admin-lc","logical-cloud-name":"admin-lc","namespace":"","user-name":"","user":"","message":"logical cloud created","logical-cloud":`+adminStored+`}`)
	r.Is(200, "GET", base+"/admin-lc", "", adminStored)
	r.Is(200, "GET", base+"/admin-lc/namespaces", "", `{"clusters":[],"namespaces":[]}`)
	r.Is(200, "GET", base+"/admin-lc/users", "", `{"users":[],"next-page-token":""}`)
	r.Is(200, "GET", base+"/admin-lc/cluster-quotas", "", `[]`)
	r.Want(409, "POST", base+"/admin-lc/user-permissions", `{"permission-name":"p","apiGroups":[""],"resources":["pods"],"verbs":["get"]}`)
	r.Want(409, "POST", base+"/admin-lc/cluster-quotas", `{"metadata":{"name":"q"},"spec":{"cpu":"1"}}`)
	require.Contains(t, r.Want(400, "POST", base, `{"metadata":{"name":"admin-2"},"spec":{"level":"admin","user":{"user-name":"u"}}}`), `"field":"spec.user"`)

	r.Want(201, "POST", base, `{"metadata":{"name":"priv"},"spec":{"level":"privileged","user":{"user-permissions":[
		{"permission-name":"nodes","apiGroups":[""],"resources":["nodes"],"verbs":["get","list"]}]}}}`)
	r.Is(200, "GET", base+"/priv/user-permissions", "", `[{"permission-name":"nodes","namespace":"","apiGroups":[""],"resources":["nodes"],"verbs":["get","list"],"metadata":null,"users":[]}]`)
	r.Want(201, "POST", base+"/priv/user-permissions", `{"permission-name":"sys","namespace":"kube-system","apiGroups":[""],"resources":["pods"],"verbs":["get"]}`)

	r.Want(201, "POST", base, `{"metadata":{"name":"std"}}`)
	require.Contains(t, r.Want(400, "POST", base+"/std/user-permissions", `{"permission-name":"sys","namespace":"kube-system","apiGroups":[""],"resources":["pods"],"verbs":["get"]}`),
		`"field":"namespace"`)
	r.Is(201, "POST", base+"/std/user-permissions", `{"permission-name":"own","namespace":"std","apiGroups":[""],"resources":["pods"],"verbs":["get"]}`,
		`{"permission-name":"own","namespace":"std","apiGroups":[""],"resources":["pods"],"verbs":["get"],"metadata":null,"users":[]}`)
}

// csrPEM makes a PEM certificate signing request for user of logical
// cloud lc of project, with the subject DCM expects.
func csrPEM(t *testing.T, project, lc, user string) string {
	t.Helper()
	csr, _, err := kube.NewCSR(kube.UserIdentity(project, lc, user))
	require.NoError(t, err)
	return string(csr)
}
