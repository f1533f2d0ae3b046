package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
)

// TestEMCOStatusParams: each of the parameters EMCO's DCM status handler
// reads, its default and its refusals (400 naming the parameter).
func TestEMCOStatusParams(t *testing.T) {
	t.Parallel()
	q, err := parseEMCOStatus("")
	require.NoError(t, err)
	require.Equal(t, &emcoStatusQuery{output: "all"}, q, "ready, all")
	q, err = parseEMCOStatus("status=deployed&output=detail&instance=3&cluster=cp%2Bc1&cluster=cp%2Bc2&resource=r1&clusters&resources&watch=false")
	require.NoError(t, err)
	require.Equal(t, &emcoStatusQuery{instance: "3", deployed: true, output: "detail", clusters: true, resources: true,
		cluster: []string{"cp+c1", "cp+c2"}, resource: []string{"r1"}}, q)
	// "+" in a query is a space: EMCO's clients send %2B (Go's url.Values).
	_, err = parseEMCOStatus("cluster=cp+c1")
	requireField(t, err, "cluster")
	for query, field := range map[string]string{
		"status=running":                      "status",
		"status=":                             "status",
		"output=full":                         "output",
		"instance=":                           "instance",
		"cluster=c1":                          "cluster",
		"cluster=cp%2Bc1%2Bx":                 "cluster",
		"cluster=cp%2B-c1":                    "cluster",
		"cluster=%2Bc1":                       "cluster",
		"resource=bad%20name":                 "resource",
		"resource=":                           "resource",
		"app=logical-cloud":                   "app",
		"outptu=summary":                      "outptu",
		"status=ready&%zz":                    "query",
		"resource=" + strings.Repeat("r", 64): "resource",
	} {
		_, err := parseEMCOStatus(query)
		requireField(t, err, field)
	}
}

func requireField(t *testing.T, err error, field string) {
	t.Helper()
	require.Error(t, err)
	st := errs.ToStatus(err)
	require.Equal(t, codes.InvalidArgument, st.Code(), err)
	var e errs.Body
	rec := httptest.NewRecorder()
	errs.WriteHTTP(rec, st)
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
	require.Equal(t, field, e.Field, e.Message)
}

// testStatus is a logical cloud instantiated on two clusters, one with
// all applied, one retrying.
func testStatus() *corev1.LogicalCloudStatus {
	return &corev1.LogicalCloudStatus{Project: "p1", LogicalCloud: "lc1", State: "Instantiating", Generation: 4, Ready: 3, Total: 4,
		Clusters: []*corev1.ClusterStatus{{
			ClusterProvider: "cp", ClusterName: "c1", State: "applied", Ready: 2, Total: 2,
			Resources: []*corev1.ResourceStatus{
				{ApiVersion: "v1", Kind: "Namespace", Name: "ns1", Operation: "apply", State: "applied", Attempts: 1},
				{ApiVersion: "rbac.authorization.k8s.io/v1", Kind: "Role", Namespace: "ns1", Name: "r1", Operation: "apply", State: "applied", Attempts: 1},
			},
		}, {
			ClusterProvider: "cp", ClusterName: "c2", State: "retrying", Ready: 1, Total: 2, LastError: "refused",
			Resources: []*corev1.ResourceStatus{
				{ApiVersion: "v1", Kind: "Namespace", Name: "ns1", Operation: "apply", State: "applied", Attempts: 1},
				{ApiVersion: "rbac.authorization.k8s.io/v1", Kind: "Role", Namespace: "ns1", Name: "r1", Operation: "apply", State: "retrying", Attempts: 3, LastError: "refused"},
			},
		}}}
}

// TestEMCOStatusAnswers: the project's status in EMCO's shapes, for each
// parameter.
func TestEMCOStatusAnswers(t *testing.T) {
	t.Parallel()
	const states = `"states":{"statusctxid":"4","actions":[{"state":"Instantiated","instance":"4","revision":4}]}`
	const head = `"project":"p1","name":"lc1",` + states + `,"deployedStatus":"Instantiating"`
	ns := `"GVK":{"Group":"","Version":"v1","Kind":"Namespace"},"name":"ns1"`
	role := `"GVK":{"Group":"rbac.authorization.k8s.io","Version":"v1","Kind":"Role"},"name":"r1"`
	for _, tc := range []struct{ query, want string }{{
		query: "",
		want: `{` + head + `,"readyStatus":"NotReady","readyCounts":{"Ready":3,"NotPresent":1},"clusters":[
			{"clusterProvider":"cp","cluster":"c1","connectivity":"Available","resources":[{` + ns + `,"readyStatus":"Ready"},{` + role + `,"readyStatus":"Ready"}]},
			{"clusterProvider":"cp","cluster":"c2","connectivity":"Retrying","resources":[{` + ns + `,"readyStatus":"Ready"},{` + role + `,"readyStatus":"NotPresent"}]}]}`,
	}, {
		query: "status=deployed",
		want: `{` + head + `,"deployedCounts":{"Applied":3,"Retrying":1},"clusters":[
			{"clusterProvider":"cp","cluster":"c1","connectivity":"Available","resources":[{` + ns + `,"deployedStatus":"Applied"},{` + role + `,"deployedStatus":"Applied"}]},
			{"clusterProvider":"cp","cluster":"c2","connectivity":"Retrying","resources":[{` + ns + `,"deployedStatus":"Applied"},{` + role + `,"deployedStatus":"Retrying"}]}]}`,
	}, {
		query: "output=summary",
		want:  `{` + head + `,"readyStatus":"NotReady","readyCounts":{"Ready":3,"NotPresent":1}}`,
	}, {
		query: "cluster=cp%2Bc1&status=deployed&output=summary",
		want:  `{` + head + `,"deployedCounts":{"Applied":2}}`,
	}, {
		query: "cluster=cp%2Bc1",
		want: `{` + head + `,"readyStatus":"Ready","readyCounts":{"Ready":2},"clusters":[
			{"clusterProvider":"cp","cluster":"c1","connectivity":"Available","resources":[{` + ns + `,"readyStatus":"Ready"},{` + role + `,"readyStatus":"Ready"}]}]}`,
	}, {
		query: "resource=r1&cluster=cp%2Bc2&cluster=cp%2Bc9",
		want: `{` + head + `,"readyStatus":"NotPresent","readyCounts":{"NotPresent":1},"clusters":[
			{"clusterProvider":"cp","cluster":"c2","connectivity":"Retrying","resources":[{` + role + `,"readyStatus":"NotPresent"}]}]}`,
	}, {
		query: "resource=nothing",
		want:  `{` + head + `,"readyStatus":"Ready"}`,
	}, {
		query: "output=detail&resource=r1&cluster=cp%2Bc2&status=deployed",
		want: `{` + head + `,"deployedCounts":{"Retrying":1},"clusters":[
			{"clusterProvider":"cp","cluster":"c2","connectivity":"Retrying","resources":[{` + role + `,"deployedStatus":"Retrying",
			"detail":{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","namespace":"ns1","name":"r1","operation":"apply","state":"retrying","attempts":3,"last-error":"refused"}}]}]}`,
	}, {
		query: "clusters&resources&status=deployed",
		want:  `{"project":"p1","name":"lc1","clustersByApp":[{"app":"logical-cloud","clusters":[{"clusterProvider":"cp","cluster":"c1"},{"clusterProvider":"cp","cluster":"c2"}]}]}`,
	}, {
		query: "resources&cluster=cp%2Bc2",
		want: `{"project":"p1","name":"lc1","resourcesByApp":[{"app":"logical-cloud","clusterProvider":"cp","cluster":"c2","resources":[
			{"name":"ns1","GVK":{"Group":"","Version":"v1","Kind":"Namespace"}},{"name":"r1","GVK":{"Group":"rbac.authorization.k8s.io","Version":"v1","Kind":"Role"}}]}]}`,
	}, {
		query: "instance=4&output=summary",
		want:  `{` + head + `,"readyStatus":"NotReady","readyCounts":{"Ready":3,"NotPresent":1}}`,
	}} {
		t.Run(tc.query, func(t *testing.T) {
			t.Parallel()
			q, err := parseEMCOStatus(tc.query)
			require.NoError(t, err)
			got, err := q.answer(testStatus())
			require.NoError(t, err)
			b, err := json.Marshal(got)
			require.NoError(t, err)
			require.JSONEq(t, tc.want, string(b))
		})
	}
	q, err := parseEMCOStatus("instance=3")
	require.NoError(t, err)
	_, err = q.answer(testStatus())
	require.Equal(t, codes.NotFound, errs.ToStatus(err).Code(), "another instance")
}

// TestEMCOStatusStates: the logical cloud's state as EMCO's state
// actions name it; before the first instantiate only the state.
func TestEMCOStatusStates(t *testing.T) {
	t.Parallel()
	q, err := parseEMCOStatus("")
	require.NoError(t, err)
	got, err := q.answer(&corev1.LogicalCloudStatus{Project: "p1", LogicalCloud: "lc1", State: "Created"})
	require.NoError(t, err)
	b, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, `{"project":"p1","name":"lc1","states":{"statusctxid":"","actions":[{"state":"Created","instance":"","revision":0}]}}`, string(b))
	for _, tc := range []struct {
		state   string
		stopped bool
		want    string
	}{
		{"Instantiated", false, "Instantiated"}, {"InstantiateFailed", false, "Instantiated"}, {"Instantiating", true, "InstantiateStopped"},
		{"Terminating", false, "Terminated"}, {"Terminated", false, "Terminated"}, {"TerminateFailed", true, "TerminateStopped"},
	} {
		require.Equal(t, tc.want, emcoStateOf(&corev1.LogicalCloudStatus{State: tc.state, Stopped: tc.stopped}), tc.state)
	}
	for _, query := range []string{"clusters", "resources"} {
		q, err := parseEMCOStatus(query)
		require.NoError(t, err)
		got, err := q.answer(&corev1.LogicalCloudStatus{Project: "p1", LogicalCloud: "lc1", State: "Created"})
		require.NoError(t, err)
		b, err := json.Marshal(got)
		require.NoError(t, err)
		require.JSONEq(t, `{"project":"p1","name":"lc1","`+query+`ByApp":[]}`, string(b))
	}
}

// TestEMCOStatusRefusedAtTheGateway: through the gateway, a bad parameter
// in EMCO's dialect is 400 naming it before any service is asked; the
// project's dialect does not read EMCO's parameters; a caller the route
// refuses gets 403 whatever the parameters.
func TestEMCOStatusRefusedAtTheGateway(t *testing.T) {
	t.Parallel()
	h := testGateway(t, zap.NewNop())
	call := func(token, dialect, query string) (int, errs.Body) {
		return callGateway(t, h, "GET", "/v2/projects/a/logical-clouds/lc1/status?"+query, token, dialect, "")
	}
	admin := pki.AdminTokenPrefix + "x"
	code, b := call(admin, DialectEMCO, "output=full")
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "output", b.Field)
	code, b = call("reader-a", DialectEMCO, "status=running")
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "status", b.Field)
	// Past the parameters the call goes to core, which cannot be reached.
	code, _ = call(admin, DialectEMCO, "status=deployed&output=summary")
	require.Equal(t, http.StatusServiceUnavailable, code)
	code, _ = call(admin, DialectDCM, "output=full")
	require.Equal(t, http.StatusServiceUnavailable, code, "the project's dialect does not read them")
	code, _ = call("pa-b", DialectEMCO, "output=full")
	require.Equal(t, http.StatusForbidden, code, "another project's status")
}
