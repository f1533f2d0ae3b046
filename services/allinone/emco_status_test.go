package allinone_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// emcoStatusAnswer is EMCO's logical cloud status as the gateway answers
// it in EMCO's dialect (EMCO's src/orchestrator/pkg/status/types.go).
type emcoStatusAnswer struct {
	Project string `json:"project"`
	Name    string `json:"name"`
	States  struct {
		Actions []struct {
			State    string `json:"state"`
			Instance string `json:"instance"`
		} `json:"actions"`
	} `json:"states"`
	DeployedStatus string         `json:"deployedStatus"`
	ReadyStatus    string         `json:"readyStatus"`
	DeployedCounts map[string]int `json:"deployedCounts"`
	ReadyCounts    map[string]int `json:"readyCounts"`
	Clusters       []struct {
		ClusterProvider string `json:"clusterProvider"`
		Cluster         string `json:"cluster"`
		Connectivity    string `json:"connectivity"`
		Resources       []struct {
			GVK struct {
				Group, Version, Kind string
			} `json:"GVK"`
			Name           string          `json:"name"`
			DeployedStatus string          `json:"deployedStatus"`
			ReadyStatus    string          `json:"readyStatus"`
			Detail         json.RawMessage `json:"detail"`
		} `json:"resources"`
	} `json:"clusters"`
}

// TestEMCOStatusQuery instantiates a logical cloud on two real clusters
// and reads its status in EMCO's dialect with each of the parameters
// EMCO's status handler reads, checking each one's effect against the
// project's status of the same logical cloud; bad values are 400 naming
// the parameter; the project's dialect keeps its own shape. After
// terminate, deployedStatus is Terminated (what EMCO's example scripts
// wait for).
func TestEMCOStatusQuery(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	apitest.RegisterHarness(t, r, h)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"emst"}}`)
	lc := "/v2/projects/emst/logical-clouds/lc-st"
	r.Want(201, "POST", "/v2/projects/emst/logical-clouds", `{"metadata": {"name": "lc-st"}, "spec": {"namespace": "emco-st-ns",
	  "user": {"user-name": "robot", "type": "token", "user-permissions": [
	    {"permission-name": "cm", "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}}}`)
	c1, c2 := h.Clusters[0].Name, h.Clusters[1].Name
	for _, c := range []string{c1, c2} {
		r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+c+`"}`)
	}

	emco := func(code int, query string) string {
		t.Helper()
		got, d, b := dialectCall(t, s, "emco", "GET", lc+"/status"+query, "")
		require.Equal(t, code, got, "%s: %s", query, b)
		require.Equal(t, "emco", d)
		return b
	}
	read := func(query string) emcoStatusAnswer {
		t.Helper()
		var a emcoStatusAnswer
		require.NoError(t, json.Unmarshal([]byte(emco(200, query)), &a))
		return a
	}

	// Before the first instantiate: the state alone, as EMCO answers it.
	require.JSONEq(t, `{"project":"emst","name":"lc-st","states":{"statusctxid":"","actions":[{"state":"Created","instance":"","revision":0}]}}`, emco(200, ""))
	require.JSONEq(t, `{"project":"emst","name":"lc-st","clustersByApp":[]}`, emco(200, "?clusters"))

	r.Want(202, "POST", lc+"/instantiate", "")
	r.Settle(lc, "Instantiated")
	var dcm struct {
		Generation string `json:"generation"`
		Total      int    `json:"total"`
		Clusters   []struct {
			Provider  string `json:"cluster-provider"`
			Name      string `json:"cluster-name"`
			Resources []struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Name       string `json:"name"`
				State      string `json:"state"`
			} `json:"resources"`
		} `json:"clusters"`
	}
	code, d, b := dialectCall(t, s, "dcm", "GET", lc+"/status?output=summary&status=deployed", "")
	require.Equal(t, 200, code, b)
	require.Equal(t, "dcm", d)
	require.NoError(t, json.Unmarshal([]byte(b), &dcm), "the project's dialect keeps its shape and reads no EMCO parameter: %s", b)
	require.Len(t, dcm.Clusters, 2)
	require.Positive(t, dcm.Total)
	perCluster := map[string]int{}
	for _, c := range dcm.Clusters {
		perCluster[c.Name] = len(c.Resources)
	}
	ns := dcm.Clusters[0].Resources[0].Name

	// No parameter: status=ready, output=all.
	a := read("")
	require.Equal(t, "emst", a.Project)
	require.Equal(t, "lc-st", a.Name)
	require.Equal(t, "Instantiated", a.DeployedStatus)
	require.Equal(t, "Instantiated", a.States.Actions[0].State)
	require.Equal(t, dcm.Generation, a.States.Actions[0].Instance)
	require.Equal(t, "Ready", a.ReadyStatus)
	require.Equal(t, map[string]int{"Ready": dcm.Total}, a.ReadyCounts)
	require.Empty(t, a.DeployedCounts)
	require.Len(t, a.Clusters, 2)
	for i, c := range a.Clusters {
		require.Equal(t, "edge", c.ClusterProvider)
		require.Equal(t, dcm.Clusters[i].Name, c.Cluster)
		require.Equal(t, "Available", c.Connectivity)
		require.Len(t, c.Resources, perCluster[c.Cluster])
		for j, res := range c.Resources {
			want := dcm.Clusters[i].Resources[j]
			require.Equal(t, want.Name, res.Name)
			require.Equal(t, want.Kind, res.GVK.Kind)
			gv := res.GVK.Version
			if res.GVK.Group != "" {
				gv = res.GVK.Group + "/" + gv
			}
			require.Equal(t, want.APIVersion, gv)
			require.Equal(t, "Ready", res.ReadyStatus)
			require.Empty(t, res.DeployedStatus)
			require.Empty(t, res.Detail)
		}
	}
	require.Equal(t, a, read("?status=ready&output=all"), "the defaults")

	// status=deployed: the resource synchronizer's states and counts.
	a = read("?status=deployed")
	require.Equal(t, map[string]int{"Applied": dcm.Total}, a.DeployedCounts)
	require.Empty(t, a.ReadyCounts)
	require.Empty(t, a.ReadyStatus)
	for _, c := range a.Clusters {
		for _, res := range c.Resources {
			require.Equal(t, "Applied", res.DeployedStatus)
			require.Empty(t, res.ReadyStatus)
		}
	}

	// output=summary: the counts, no clusters.
	a = read("?output=summary")
	require.Empty(t, a.Clusters)
	require.Equal(t, map[string]int{"Ready": dcm.Total}, a.ReadyCounts)

	// output=detail: each resource's record.
	a = read("?output=detail")
	var detail struct {
		Kind, State string
	}
	require.NoError(t, json.Unmarshal(a.Clusters[0].Resources[0].Detail, &detail))
	require.Equal(t, "applied", detail.State)
	require.Equal(t, dcm.Clusters[0].Resources[0].Kind, detail.Kind)

	// cluster: one cluster, its counts.
	a = read("?cluster=edge%2B" + c2)
	require.Len(t, a.Clusters, 1)
	require.Equal(t, c2, a.Clusters[0].Cluster)
	require.Equal(t, map[string]int{"Ready": perCluster[c2]}, a.ReadyCounts)
	a = read("?cluster=edge%2B" + c2 + "&cluster=edge%2B" + c1)
	require.Len(t, a.Clusters, 2)
	a = read("?cluster=other%2B" + c1)
	require.Empty(t, a.Clusters)
	require.Empty(t, a.ReadyCounts)

	// resource: only resources of that name.
	a = read("?resource=" + ns)
	require.Len(t, a.Clusters, 2)
	n := 0
	for _, c := range a.Clusters {
		for _, res := range c.Resources {
			require.Equal(t, ns, res.Name)
			n++
		}
	}
	require.Equal(t, map[string]int{"Ready": n}, a.ReadyCounts)
	require.Less(t, n, dcm.Total)

	// clusters, resources: EMCO's other two answers.
	require.JSONEq(t, `{"project":"emst","name":"lc-st","clustersByApp":[{"app":"logical-cloud","clusters":[
		{"clusterProvider":"edge","cluster":"`+dcm.Clusters[0].Name+`"},{"clusterProvider":"edge","cluster":"`+dcm.Clusters[1].Name+`"}]}]}`,
		emco(200, "?clusters&status=deployed"))
	var byApp struct {
		ResourcesByApp []struct {
			App, Cluster string
			Resources    []struct{ Name string } `json:"resources"`
		} `json:"resourcesByApp"`
	}
	require.NoError(t, json.Unmarshal([]byte(emco(200, "?resources&cluster=edge%2B"+c1)), &byApp))
	require.Len(t, byApp.ResourcesByApp, 1)
	require.Equal(t, c1, byApp.ResourcesByApp[0].Cluster)
	require.Equal(t, "logical-cloud", byApp.ResourcesByApp[0].App)
	require.Len(t, byApp.ResourcesByApp[0].Resources, perCluster[c1])

	// instance: the current one, or 404.
	require.Equal(t, read("?output=summary"), read("?output=summary&instance="+dcm.Generation))
	gen, err := strconv.Atoi(dcm.Generation)
	require.NoError(t, err)
	emco(404, "?instance="+strconv.Itoa(gen+1))

	// Bad values and unknown parameters: 400 naming them.
	for query, field := range map[string]string{"?status=running": "status", "?output=full": "output", "?instance=": "instance",
		"?cluster=" + c1: "cluster", "?resource=a%20b": "resource", "?apps": "apps"} {
		var e struct{ Field string }
		require.NoError(t, json.Unmarshal([]byte(emco(400, query)), &e))
		require.Equal(t, field, e.Field, query)
	}

	// EMCO's other controllers: what DCM does instead, on the same stack.
	code, _, b = dialectCall(t, s, "emco", "POST", "/v2/controllers", `{"metadata":{"name":"rsync"},"spec":{"host":"rsync","port":9031}}`)
	require.Equal(t, 501, code, b)
	require.Contains(t, b, "DCM's resource synchronizer is built in")

	r.Want(202, "POST", lc+"/terminate", "")
	r.Settle(lc, "Terminated")
	a = read("?status=deployed")
	require.Equal(t, "Terminated", a.DeployedStatus)
	require.Equal(t, "Terminated", a.States.Actions[0].State)
	r.Want(204, "DELETE", lc, "")
}
