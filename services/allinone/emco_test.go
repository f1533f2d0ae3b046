package allinone_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// EMCO's integration suite (scripts/integration_test in EMCO's repository)
// replayed: its 45 DCM cases, in the order of its full_api_test_list, each
// sent as its test_suite/*.py sends it (method, headers, json.dumps of the
// payload, dcm_url + anchor) and checked as it checks it (the status; the
// whole body as JSON where the case gives a ResponseText). The payloads
// and expected bodies are under testdata/emco/, one file each, as EMCO's
// case files hold them: <case>.body.json is the request body byte for byte
// as json.dumps writes it, <case>.response.json the ResponseText.

// emcoDeviation is a case where DCM answers differently from EMCO on
// purpose (docs/emco.md lists them): a clear 4xx, and why.
type emcoDeviation struct {
	status int
	reason string
}

// emcoDiffers is one part of EMCO's expected body that DCM answers
// differently, with DCM's value: path is slash-separated from the body's
// root ("0/spec/namespace"; "" is the whole body) and ours is JSON.
type emcoDiffers struct {
	path, ours, reason string
}

// emcoCase is one of EMCO's DCM cases.
type emcoCase struct {
	name   string // EMCO's case file name, without .json
	method string
	path   string // EMCO's anchor: appended to /v2/
	body   bool   // testdata/emco/<name>.body.json is the request body
	status int    // EMCO's expected status
	// response: testdata/emco/<name>.response.json is EMCO's ResponseText,
	// compared whole as JSON (with differs applied).
	response  bool
	differs   []emcoDiffers
	deviation *emcoDeviation
	// settled: before sending, wait until proj1's logical cloud "default"
	// shows this state. EMCO's suite sleeps after instantiate and relied
	// on that for what follows; DCM answers 202 at once and the
	// transition goes on, so a case that needs it finished waits for it.
	settled string
}

// An admin logical cloud has no namespace of its own in DCM (it uses the
// clusters' admin access; see TestLogicalCloudLevels); EMCO shows "default"
// once it is instantiated.
const emcoAdminNamespace = `""`

const emcoAdminNamespaceWhy = "an admin logical cloud has no namespace in DCM; EMCO shows \"default\" once instantiated"

// DCM keeps a quota's values as canonical Kubernetes quantities (the
// ResourceQuota's own spelling); EMCO answers the text it was sent.
const emcoQuantityWhy = "quota values are stored as canonical Kubernetes quantities: 1000 is 1k (the same quantity)"

// The refused permission (deviation of test_postUserPermissions).
const emcoPermissionWhy = "user permissions on an admin logical cloud are refused (409): it uses the clusters' admin access, " +
	"so they could never take effect; EMCO stores them (201)"

// emcoCases are the DCM cases of EMCO's full_api_test_list, in its order.
// Earlier cases of that list (projects, cluster providers, clusters) made
// project proj1, provider provider1 and cluster cluster1: emcoSetup does.
var emcoCases = []emcoCase{
	{name: "test_postLogicalClouds", method: "POST", path: "projects/proj1/logical-clouds", body: true, status: 201, response: true},
	{name: "test_postLogicalCloudsLc1", method: "POST", path: "projects/proj1/logical-clouds", body: true, status: 201, response: true},
	{name: "test_getLogicalClouds", method: "GET", path: "projects/proj1/logical-clouds", status: 200, response: true},
	{name: "test_getLogicalCloudsByName", method: "GET", path: "projects/proj1/logical-clouds/default", status: 200, response: true},
	{name: "test_getLogicalCloudsLc1ByName", method: "GET", path: "projects/proj1/logical-clouds/lc1", status: 200, response: true},
	{name: "test_postClusterReference", method: "POST", path: "projects/proj1/logical-clouds/default/cluster-references", body: true, status: 201, response: true},
	{name: "test_getClusterReferences", method: "GET", path: "projects/proj1/logical-clouds/default/cluster-references", status: 200, response: true},
	{name: "test_getClusterReferenceByName", method: "GET", path: "projects/proj1/logical-clouds/default/cluster-references/cluster1-ref", status: 200, response: true},
	{name: "test_instantiateLogicalClouds", method: "POST", path: "projects/proj1/logical-clouds/default/instantiate", status: 202},
	// At once: applying again is refused while it is Instantiating and
	// once it is Instantiated alike.
	{name: "test_instantiateLogicalCloudsNeg409", method: "POST", path: "projects/proj1/logical-clouds/default/instantiate", status: 409},
	{name: "test_getLogicalCloudsAfterInstantiate", method: "GET", path: "projects/proj1/logical-clouds", status: 200, response: true,
		differs: []emcoDiffers{{path: "0/spec/namespace", ours: emcoAdminNamespace, reason: emcoAdminNamespaceWhy}}},
	{name: "test_getLogicalCloudsByNameAfterInstantiate", method: "GET", path: "projects/proj1/logical-clouds/default", status: 200, response: true,
		differs: []emcoDiffers{{path: "spec/namespace", ours: emcoAdminNamespace, reason: emcoAdminNamespaceWhy}}},
	{name: "test_postUserPermissions", method: "POST", path: "projects/proj1/logical-clouds/default/user-permissions", body: true, status: 201, response: true,
		deviation: &emcoDeviation{409, emcoPermissionWhy}},
	{name: "test_postUserPermissionsNeg400", method: "POST", path: "projects/proj1/logical-clouds/default/user-permissions", body: true, status: 400},
	{name: "test_getUserPermissions", method: "GET", path: "projects/proj1/logical-clouds/default/user-permissions", status: 200, response: true,
		differs: []emcoDiffers{{path: "", ours: `[]`, reason: "the permission was refused (test_postUserPermissions): there is none to list"}}},
	{name: "test_getUserPermissionsNeg404NoProject", method: "GET", path: "projects/nosuchproject/logical-clouds/default/user-permissions", status: 404},
	{name: "test_getUserPermissionsNeg404NoLogicalCloud", method: "GET", path: "projects/proj1/logical-clouds/nosuchdefault/user-permissions", status: 404},
	{name: "test_getUserPermissionsByName", method: "GET", path: "projects/proj1/logical-clouds/default/user-permissions/lc1-permission", status: 200, response: true,
		deviation: &emcoDeviation{404, "the permission was refused (test_postUserPermissions): there is none to read"}},
	{name: "test_getUserPermissionsByNameNeg404NoProject", method: "GET", path: "projects/nosuchproj1/logical-clouds/default/user-permissions/lc1-permission", status: 404},
	{name: "test_getUserPermissionsByNameNeg404NoLogicalCloud", method: "GET", path: "projects/proj1/logical-clouds/nosuchdefault/user-permissions/lc1-permission", status: 404},
	{name: "test_getUserPermissionsByNameNeg404NoUserPermission", method: "GET", path: "projects/proj1/logical-clouds/default/user-permissions/nosuchlc1-permission", status: 404},
	{name: "test_postClusterQuotas", method: "POST", path: "projects/proj1/logical-clouds/lc1/cluster-quotas", body: true, status: 201, response: true,
		differs: []emcoDiffers{{path: "spec/configmaps", ours: `"1k"`, reason: emcoQuantityWhy}}},
	{name: "test_postClusterQuotasNeg400", method: "POST", path: "projects/proj1/logical-clouds/lc1/cluster-quotas", body: true, status: 400},
	{name: "test_getClusterQuotas", method: "GET", path: "projects/proj1/logical-clouds/lc1/cluster-quotas", status: 200, response: true,
		differs: []emcoDiffers{{path: "0/spec/configmaps", ours: `"1k"`, reason: emcoQuantityWhy}}},
	{name: "test_getClusterQuotasNeg404NoProject", method: "GET", path: "projects/nosuchproject/logical-clouds/lc1/cluster-quotas", status: 404},
	{name: "test_getClusterQuotasNeg404NoLogicalCloud", method: "GET", path: "projects/project/logical-clouds/nosuchlc1/cluster-quotas", status: 404},
	{name: "test_getClustersQuotasByName", method: "GET", path: "projects/proj1/logical-clouds/lc1/cluster-quotas/quota-1", status: 200, response: true,
		differs: []emcoDiffers{{path: "spec/configmaps", ours: `"1k"`, reason: emcoQuantityWhy}}},
	{name: "test_getClusterQuotasByNameNeg404NoProject", method: "GET", path: "projects/nosuchproj1/logical-clouds/lc1/cluster-quotas/quota-1", status: 404},
	{name: "test_getClusterQuotasByNameNeg404NoLogicalCloud", method: "GET", path: "projects/proj1/logical-clouds/nosuchlc1/cluster-quotas/quota-1", status: 404},
	{name: "test_getClusterQuotasByNameNeg404NoClusterQuotas", method: "GET", path: "projects/proj1/logical-clouds/lc1/cluster-quotas/nosuchquota-1", status: 404},
	// Terminate, then at once terminate again; EMCO's suite does not wait
	// between the two either. The second is a 409 whether the first is
	// still running ("already being terminated") or has finished (an
	// admin logical cloud puts nothing on its clusters: Terminated).
	{name: "test_terminateLogicalClouds", method: "POST", path: "projects/proj1/logical-clouds/default/terminate", status: 202},
	{name: "test_terminateLogicalCloudsNeg409", method: "POST", path: "projects/proj1/logical-clouds/default/terminate", status: 409},
	{name: "test_getLogicalCloudsAfterTerminate", method: "GET", path: "projects/proj1/logical-clouds", status: 200, response: true,
		differs: []emcoDiffers{{path: "0/spec/namespace", ours: emcoAdminNamespace, reason: emcoAdminNamespaceWhy}}},
	{name: "test_getLogicalCloudsByNameAfterTerminate", method: "GET", path: "projects/proj1/logical-clouds/default", status: 200, response: true,
		differs: []emcoDiffers{{path: "spec/namespace", ours: emcoAdminNamespace, reason: emcoAdminNamespaceWhy}}},
	// A cluster stays held by a logical cloud until its terminate has
	// finished (and the logical cloud is deleted only once Terminated):
	// wait for it, as EMCO's suite relied on its sleeps.
	{name: "test_deleteClusterReference", method: "DELETE", path: "projects/proj1/logical-clouds/default/cluster-references/cluster1-ref", status: 204,
		settled: "Terminated"},
	{name: "test_deleteUserPermissions", method: "DELETE", path: "projects/proj1/logical-clouds/default/user-permissions/lc1-permission", status: 204,
		deviation: &emcoDeviation{404, "the permission was refused (test_postUserPermissions): there is none to delete"}},
	{name: "test_deleteUserPermissionsNeg404NoProject", method: "DELETE", path: "projects/nosuchproj1/logical-clouds/default/user-permissions/lc1-permission", status: 404},
	{name: "test_deleteUserPermissionsNeg404NoLogicalCloud", method: "DELETE", path: "projects/proj1/logical-clouds/nosuchdefault/user-permissions/lc1-permission", status: 404},
	{name: "test_deleteUserPermissionsNeg404NoUser", method: "DELETE", path: "projects/proj1/logical-clouds/default/user-permissions/nosuchlc1-permission", status: 404},
	{name: "test_deleteClusterQuotas", method: "DELETE", path: "projects/proj1/logical-clouds/lc1/cluster-quotas/quota-1", status: 204},
	{name: "test_deleteClusterQuotasNeg404NoProject", method: "DELETE", path: "projects/nosuchproj1/logical-clouds/lc1/cluster-quotas/quota-1", status: 404},
	{name: "test_deleteClusterQuotasNeg404NoLogicalCloud", method: "DELETE", path: "projects/proj1/logical-clouds/nosuchlc1/cluster-quotas/quota-1", status: 404},
	{name: "test_deleteClusterQuotasNeg404NoClusterQuotas", method: "DELETE", path: "projects/proj1/logical-clouds/lc1/cluster-quotas/nosuchquota-1", status: 404},
	{name: "test_deleteLogicalClouds", method: "DELETE", path: "projects/proj1/logical-clouds/default", status: 204},
	{name: "test_deleteLogicalCloudsLc1", method: "DELETE", path: "projects/proj1/logical-clouds/lc1", status: 204},
}

// TestEMCOSuiteReplay replays EMCO's DCM cases against the program with
// EMCO's dialect as the gateway's default (-gateway-dialect emco, as an
// EMCO user would run it): every case gets EMCO's status, or a documented
// deviation's, and every body EMCO's suite compares is EMCO's, but for the
// listed differences.
func TestEMCOSuiteReplay(t *testing.T) {
	// Three clusters though one is used: the harness is shared by the
	// test binary and made by its first user, and the other tests need
	// three.
	h := kubetest.ForTests(t, 3)
	s := stacktest.StartWith(t, stacktest.Options{Args: []string{"-gateway-dialect", "emco"}})
	replayEMCO(t, s, h, true)
}

// TestEMCOSuiteStatusesWithDefaultDialect replays the same cases against
// the program as it starts by default (the project's dialect): EMCO's
// request bodies are understood all the same and get the same statuses
// (only statuses are compared: a request with no body is answered in the
// project's shapes).
func TestEMCOSuiteStatusesWithDefaultDialect(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	s := stacktest.Start(t)
	replayEMCO(t, s, h, false)
}

// emcoSetup makes what EMCO's suite made before its DCM cases: project
// proj1, cluster provider provider1 and its cluster cluster1 (the first
// test cluster), in the project's own request shapes.
func emcoSetup(t *testing.T, s *stacktest.Stack, h *kubetest.Harness) {
	t.Helper()
	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"proj1"}}`)
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"provider1"}}`)
	body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": "cluster1"},
		"spec": map[string]any{"kubeconfig": string(h.Clusters[0].Kubeconfig)}})
	require.NoError(t, err)
	r.Want(201, "POST", "/v2/cluster-providers/provider1/clusters", string(body))
}

// replayEMCO sends emcoCases in order, each a subtest (a failed case does
// not stop the sequence: EMCO's suite runs each case alone too), and
// checks bodies when bodies is set.
func replayEMCO(t *testing.T, s *stacktest.Stack, h *kubetest.Harness, bodies bool) {
	t.Helper()
	emcoSetup(t, s, h)
	var emcoStatus, deviations int
	var failed []string
	for _, c := range emcoCases {
		ok := t.Run(c.name, func(t *testing.T) {
			if c.settled != "" {
				waitEMCOState(t, s, "/v2/projects/proj1/logical-clouds/default", c.settled)
			}
			var body string
			if c.body {
				body = emcoFile(t, c.name+".body.json")
			}
			code, header, got := sendEMCO(t, s.Admin, c.method, s.URL+"/v2/"+c.path, body)
			want := c.status
			if c.deviation != nil {
				want = c.deviation.status
			}
			switch code {
			case c.status:
				emcoStatus++
			case want:
				deviations++
			}
			require.Equal(t, want, code, "%s /v2/%s: %s", c.method, c.path, got)
			if code == http.StatusAccepted {
				// The work goes on; the answer is the status as it stands.
				var st struct {
					LogicalCloud string `json:"logical-cloud"`
					State        string `json:"state"`
				}
				require.NoError(t, json.Unmarshal(got, &st), "%s", got)
				require.Equal(t, "default", st.LogicalCloud, "%s", got)
				require.NotEmpty(t, st.State, "%s", got)
			}
			if !bodies || !c.response || c.deviation != nil {
				return
			}
			require.Equal(t, "emco", header.Get("Dcm-Dialect"), "the answer's dialect")
			require.JSONEq(t, emcoExpected(t, c), string(got), "%s /v2/%s", c.method, c.path)
		})
		if !ok {
			failed = append(failed, c.name)
		}
	}
	t.Logf("EMCO cases: %d of %d get EMCO's status; %d documented deviations", emcoStatus, len(emcoCases), deviations)
	if len(failed) > 0 {
		t.Logf("failed: %s", strings.Join(failed, ", "))
	}
}

// emcoExpected is the case's ResponseText with DCM's values where the case
// lists a difference.
func emcoExpected(t *testing.T, c emcoCase) string {
	t.Helper()
	var doc any
	require.NoError(t, json.Unmarshal([]byte(emcoFile(t, c.name+".response.json")), &doc))
	for _, d := range c.differs {
		var ours any
		require.NoError(t, json.Unmarshal([]byte(d.ours), &ours), "ours of %q", d.path)
		doc = setJSON(t, doc, d.path, ours)
	}
	b, err := json.Marshal(doc)
	require.NoError(t, err)
	return string(b)
}

// setJSON sets the value at a slash-separated path of a decoded JSON
// document (array elements by index) and returns the document; the path
// must exist.
func setJSON(t *testing.T, doc any, path string, v any) any {
	t.Helper()
	if path == "" {
		return v
	}
	head, rest, _ := strings.Cut(path, "/")
	switch n := doc.(type) {
	case map[string]any:
		old, ok := n[head]
		require.True(t, ok, "no %q in %v", head, n)
		n[head] = setJSON(t, old, rest, v)
	case []any:
		i, err := strconv.Atoi(head)
		require.NoError(t, err, "path %q", path)
		require.Less(t, i, len(n), "no element %d in %v", i, n)
		n[i] = setJSON(t, n[i], rest, v)
	default:
		t.Fatalf("path %q goes into %v", path, doc)
	}
	return doc
}

// emcoFile reads testdata/emco/name.
func emcoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "emco", name))
	require.NoError(t, err)
	return strings.TrimSuffix(string(b), "\n")
}

// sendEMCO sends a request with the headers EMCO's suite sends for the
// method (POST: Content-Type and accept application/json; GET: accept
// application/json; DELETE: accept */*) and returns the status, the
// answer's headers and its body.
func sendEMCO(t *testing.T, c *http.Client, method, url, body string) (int, http.Header, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(t, err)
	switch method {
	case "POST", "PUT":
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("accept", "application/json")
	case "DELETE":
		req.Header.Set("accept", "*/*")
	default:
		req.Header.Set("accept", "application/json")
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

// dialectCall sends a request in a dialect (the Dcm-Dialect header; ""
// sends none) and returns the status, the answer's dialect and its body.
func dialectCall(t *testing.T, s *stacktest.Stack, dialect, method, path, body string) (int, string, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL+path, r)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if dialect != "" {
		req.Header.Set("Dcm-Dialect", dialect)
	}
	resp, err := s.Admin.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Dcm-Dialect"), string(b)
}

// waitEMCOState waits until the logical cloud at lc shows state (its
// status read in the project's dialect, whatever the gateway's default).
func waitEMCOState(t *testing.T, s *stacktest.Stack, lc, state string) {
	t.Helper()
	apitest.Eventually(t, lc+" is "+state, func() bool {
		code, _, b := dialectCall(t, s, "dcm", "GET", lc+"/status", "")
		require.Equal(t, 200, code, "GET %s/status: %s", lc, b)
		var st apitest.LCStatus
		require.NoError(t, json.Unmarshal([]byte(b), &st), b)
		return st.State == state
	})
}

// TestEMCORoundTrip creates each DCM resource in EMCO's shape and reads it
// back in both dialects (EMCO's read is what was sent; the project's holds
// the same values under its own keys), and creates in the project's shape
// and reads in EMCO's. The answers say their dialect.
func TestEMCORoundTrip(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	registerClusters(t, s, r)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"rt"}}`)
	base := "/v2/projects/rt/logical-clouds"

	// want sends in a dialect, requires the status and the answer's
	// dialect, and returns the body.
	want := func(code int, dialect, answered, method, path, body string) string {
		t.Helper()
		got, d, b := dialectCall(t, s, dialect, method, path, body)
		require.Equal(t, code, got, "%s %s (%s): %s", method, path, dialect, b)
		require.Equal(t, answered, d, "the dialect of %s %s (%s)", method, path, dialect)
		return b
	}

	// EMCO's shapes in, both dialects out.
	lcEMCO := `{"metadata":{"name":"lc-emco","description":"from emcoctl","userData1":"u1","userData2":"u2"},
		"spec":{"namespace":"ns-emco","level":"1","labels":{"geo":"eu","perf":"max"},"user":{"userName":"user-1","type":"certificate"}}}`
	lc := base + "/lc-emco"
	// No header: EMCO's spellings in the body choose EMCO's answer.
	require.JSONEq(t, lcEMCO, want(201, "", "emco", "POST", base, lcEMCO))
	require.JSONEq(t, lcEMCO, want(200, "emco", "emco", "GET", lc, ""))
	got := decodeObject(t, want(200, "dcm", "dcm", "GET", lc, ""))
	require.Equal(t, map[string]any{"name": "lc-emco", "description": "from emcoctl", "userData1": "u1", "userData2": "u2"}, got["metadata"])
	spec := asObject(t, got["spec"])
	require.Equal(t, "ns-emco", spec["namespace"])
	require.Equal(t, "standard", spec["level"])
	user := asObject(t, spec["user"])
	require.Equal(t, "user-1", user["user-name"])
	require.Equal(t, "certificate", user["type"])
	require.ElementsMatch(t, []any{map[string]any{"key": "geo", "value": "eu"}, map[string]any{"key": "perf", "value": "max"}}, spec["labels"])
	// Without a header and without a body the answer is the gateway's
	// default, the project's dialect.
	require.Equal(t, got, decodeObject(t, want(200, "", "dcm", "GET", lc, "")))

	refEMCO := `{"metadata":{"name":"ref-c1","description":"c1 for lc-emco","userData1":"a","userData2":"b"},
		"spec":{"clusterProvider":"edge","cluster":"c1","loadBalancerIP":"10.0.0.1","certificate":""}}`
	require.JSONEq(t, refEMCO, want(201, "", "emco", "POST", lc+"/cluster-references", refEMCO))
	require.JSONEq(t, refEMCO, want(200, "emco", "emco", "GET", lc+"/cluster-references/ref-c1", ""))
	require.JSONEq(t, "["+refEMCO+"]", want(200, "emco", "emco", "GET", lc+"/cluster-references", ""))
	refDCM := `{"cluster-provider":"edge","cluster-name":"c1","loadbalancer-ip":"10.0.0.1",
		"metadata":{"name":"ref-c1","description":"c1 for lc-emco","userData1":"a","userData2":"b"}}`
	require.JSONEq(t, refDCM, want(200, "dcm", "dcm", "GET", lc+"/cluster-references/ref-c1", ""))
	require.JSONEq(t, refDCM, want(200, "dcm", "dcm", "GET", lc+"/cluster-providers/edge/cluster-references/c1", ""))

	permEMCO := `{"metadata":{"name":"perm-1","description":"read pods","userData1":"a","userData2":"b"},
		"spec":{"namespace":"ns-emco","apiGroups":[""],"resources":["pods"],"verbs":["get","list"]}}`
	require.JSONEq(t, permEMCO, want(201, "", "emco", "POST", lc+"/user-permissions", permEMCO))
	require.JSONEq(t, permEMCO, want(200, "emco", "emco", "GET", lc+"/user-permissions/perm-1", ""))
	require.JSONEq(t, "["+permEMCO+"]", want(200, "emco", "emco", "GET", lc+"/user-permissions", ""))
	require.JSONEq(t, `{"permission-name":"perm-1","namespace":"ns-emco","apiGroups":[""],"resources":["pods"],"verbs":["get","list"],
		"metadata":{"name":"perm-1","description":"read pods","userData1":"a","userData2":"b"},"users":[]}`,
		want(200, "dcm", "dcm", "GET", lc+"/user-permissions/perm-1", ""))

	// Quotas and kv-pairs have one shape in both dialects.
	quota := `{"metadata":{"name":"quota-1","description":"q","userData1":"a","userData2":"b"},
		"spec":{"limits.cpu":"4","limits.memory":"8Gi","pods":"50","count/deployments.apps":"10"}}`
	require.JSONEq(t, quota, want(201, "emco", "emco", "POST", lc+"/cluster-quotas", quota))
	// DCM's answer adds the quota's scopes, user and enforcement.
	for d, q := range map[string]string{"emco": quota, "dcm": strings.TrimSuffix(quota, "}") + quotaTail("quota-1", "") + "}"} {
		require.JSONEq(t, q, want(200, d, d, "GET", lc+"/cluster-quotas/quota-1", ""))
		require.JSONEq(t, "["+q+"]", want(200, d, d, "GET", lc+"/cluster-quotas", ""))
	}
	kv := `{"metadata":{"name":"kv-1","description":"settings","userData1":"a","userData2":"b"},"spec":{"kv":[{"db.host":"10.0.0.9"},{"mode":"edge"}]}}`
	require.JSONEq(t, kv, want(201, "emco", "emco", "POST", lc+"/kv-pairs", kv))
	for _, d := range []string{"emco", "dcm"} {
		require.JSONEq(t, kv, want(200, d, d, "GET", lc+"/kv-pairs/kv-1", ""))
		require.JSONEq(t, "["+kv+"]", want(200, d, d, "GET", lc+"/kv-pairs", ""))
	}

	// The project's shapes in, EMCO's out.
	lcDCM := `{"metadata":{"name":"lc-dcm","description":"from dcmctl"},
		"spec":{"namespace":"ns-dcm","level":"standard","labels":[{"key":"tier","value":"gold"}],"user":{"user-name":"user-2","type":"certificate"}}}`
	want(201, "", "dcm", "POST", base, lcDCM)
	lc = base + "/lc-dcm"
	require.JSONEq(t, `{"metadata":{"name":"lc-dcm","description":"from dcmctl","userData1":"","userData2":""},
		"spec":{"namespace":"ns-dcm","level":"1","labels":{"tier":"gold"},"user":{"userName":"user-2","type":"certificate"}}}`,
		want(200, "emco", "emco", "GET", lc, ""))
	want(201, "", "dcm", "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"c2","loadbalancer-ip":"10.0.0.2"}`)
	// A reference made without a name is named after its cluster.
	refC2 := `{"metadata":{"name":"c2","description":"","userData1":"","userData2":""},
		"spec":{"clusterProvider":"edge","cluster":"c2","loadBalancerIP":"10.0.0.2","certificate":""}}`
	require.JSONEq(t, refC2, want(200, "emco", "emco", "GET", lc+"/cluster-references/c2", ""))
	require.JSONEq(t, refC2, want(200, "emco", "emco", "GET", lc+"/cluster-providers/edge/cluster-references/c2", ""))
	want(201, "", "dcm", "POST", lc+"/user-permissions", `{"permission-name":"perm-2","apiGroups":["apps"],"resources":["deployments"],"verbs":["get"]}`)
	require.JSONEq(t, `{"metadata":{"name":"perm-2","description":"","userData1":"","userData2":""},
		"spec":{"namespace":"ns-dcm","apiGroups":["apps"],"resources":["deployments"],"verbs":["get"]}}`,
		want(200, "emco", "emco", "GET", lc+"/user-permissions/perm-2", ""))
}

// decodeObject decodes a JSON object.
func decodeObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), s)
	return m
}

// asObject requires v to be a JSON object.
func asObject(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "not an object: %v", v)
	return m
}
