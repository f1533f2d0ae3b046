package allinone_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// TestClusterHealthOverREST: with probes every second, GET of a registered
// cluster shows its health in status (state, since, last-seen,
// server-version), the list filters by state (400 naming state for an
// unknown one), and a logical cloud applied while a cluster's API server
// is stopped names that cluster Unreachable in its status (health, and
// its last-errors line), then is Instantiated once it is back. Not
// parallel: it stops a shared cluster's API server, and restarts it.
func TestClusterHealthOverREST(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	r := apitest.NewREST(t, stacktest.StartWith(t, stacktest.Options{Args: []string{"-cluster-probe-interval", "1s"}}))
	apitest.RegisterHarness(t, r, h)
	type cluster struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Status map[string]any `json:"status"`
	}
	get := func(name string) cluster {
		t.Helper()
		var c cluster
		require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", "/v2/cluster-providers/edge/clusters/"+name, "")), &c))
		return c
	}
	waitState := func(name, want string) cluster {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			c := get(name)
			if c.Status["state"] == want {
				return c
			}
			require.True(t, time.Now().Before(deadline), "%s: %v, not %s", name, c.Status, want)
			time.Sleep(100 * time.Millisecond)
		}
	}
	for _, c := range h.Clusters {
		got := waitState(c.Name, "Ready")
		for _, k := range []string{"since", "last-seen", "server-version"} {
			require.NotEmpty(t, got.Status[k], "%s: %v", k, got.Status)
		}
	}
	var list []cluster
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", "/v2/cluster-providers/edge/clusters?state=Ready", "")), &list))
	require.Len(t, list, 3)
	require.Equal(t, "[]", strings.TrimSpace(r.Want(200, "GET", "/v2/cluster-providers/edge/clusters?state=Unreachable", "")))
	require.Contains(t, r.Want(400, "GET", "/v2/cluster-providers/edge/clusters?state=Nope", ""), `"state"`)

	down := h.Clusters[2]
	down.StopAPIServer()
	t.Cleanup(func() { _ = down.StartAPIServer(context.Background()) }) // running already: an error, ignored
	waitState(down.Name, "Unreachable")
	require.Contains(t, r.Want(200, "GET", "/v2/cluster-providers/edge/clusters?state=Unreachable", ""), `"`+down.Name+`"`)

	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"health"}}`)
	lc := "/v2/projects/health/logical-clouds/lc-h"
	r.Want(201, "POST", "/v2/projects/health/logical-clouds", `{"metadata": {"name": "lc-h"}, "spec": {"namespace": "health-ns",
	  "user": {"user-name": "robot", "type": "token", "user-permissions": [
	    {"permission-name": "cm", "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}}}`)
	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+down.Name+`"}`)
	r.Want(202, "POST", lc+"/apply", "")
	type view struct {
		LastErrors []string `json:"last-errors"`
		Clusters   []struct {
			Name   string `json:"cluster-name"`
			State  string `json:"state"`
			Health string `json:"health"`
		} `json:"clusters"`
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var v view
		require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/status", "")), &v))
		if len(v.Clusters) == 1 && v.Clusters[0].Health == "Unreachable" && len(v.LastErrors) == 1 {
			require.Equal(t, "retrying", v.Clusters[0].State)
			require.Contains(t, v.LastErrors[0], "edge/"+down.Name+" (Unreachable): ")
			break
		}
		require.True(t, time.Now().Before(deadline), "status: %+v", v)
		time.Sleep(100 * time.Millisecond)
	}

	require.NoError(t, down.StartAPIServer(context.Background()))
	waitState(down.Name, "Ready")
	r.Settle(lc, "Instantiated")
	var v view
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/status", "")), &v))
	require.Empty(t, v.Clusters[0].Health)
}
