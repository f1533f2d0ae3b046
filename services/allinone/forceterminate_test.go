package allinone_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// TestForcedTerminate is the way out of a terminate that waits for a
// cluster that will not come back: terminate while a cluster is down waits
// (Terminating, the cluster retrying); a project admin may not force it
// (403 naming force); the admin's terminate?force=true settles it at once
// as Terminated, the status listing what is left on that cluster as
// orphaned; the objects are indeed still there when it is back; the
// logical cloud can then be deleted, or applied again.
func TestForcedTerminate(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	apitest.RegisterHarness(t, r, h)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"forced"}}`)
	lc := "/v2/projects/forced/logical-clouds/lc-f"
	r.Want(201, "POST", "/v2/projects/forced/logical-clouds", `{"metadata": {"name": "lc-f"}, "spec": {"namespace": "forced-ns",
	  "user": {"user-name": "robot", "type": "token", "user-permissions": [
	    {"permission-name": "cm", "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}}}`)
	up, down := h.Clusters[0], h.Clusters[1]
	for _, c := range []*kubetest.Cluster{up, down} {
		r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+c.Name+`"}`)
	}
	r.Want(202, "POST", lc+"/apply", "")
	r.Settle(lc, "Instantiated")

	down.StopAPIServer()
	restarted := false
	defer func() {
		if !restarted {
			_ = down.StartAPIServer(context.Background())
		}
	}()
	r.Want(202, "POST", lc+"/terminate", "")
	apitest.Eventually(t, "terminate is done on "+up.Name+" and retrying on "+down.Name, func() bool {
		st := r.Status(lc)
		states := map[string]string{}
		for _, c := range st.Clusters {
			states[c.Name] = c.State
		}
		return st.State == "Terminating" && states[up.Name] == "deleted" && states[down.Name] == "retrying"
	})

	cert := s.Issue(t, pki.Identity{Subject: "pa-forced", Role: pki.RoleProjectAdmin, Project: "forced"}, time.Now().Add(time.Hour))
	pa := &apitest.REST{T: t, C: s.Client(&cert), Base: s.URL}
	require.Contains(t, pa.Want(403, "POST", lc+"/terminate?force=true", ""), "force")
	require.Equal(t, "Terminating", r.Status(lc).State, "refused: nothing changed")

	r.Want(202, "POST", lc+"/terminate?force=true", "")
	st := r.Settle(lc, "Terminated")
	orphans := 0
	for _, c := range st.Clusters {
		switch c.Name {
		case up.Name:
			require.Equal(t, "deleted", c.State)
		case down.Name:
			require.Equal(t, "orphaned", c.State)
			for _, res := range c.Resources {
				require.Equal(t, "orphaned", res.State, res.Kind+" "+res.Name)
				require.Contains(t, res.LastError, "may remain")
				orphans++
			}
		}
	}
	require.NotZero(t, orphans, "what may remain is listed")

	require.NoError(t, down.StartAPIServer(context.Background()))
	restarted = true
	_, err := adminOf(t, down).CoreV1().Namespaces().Get(context.Background(), "forced-ns", metav1.GetOptions{})
	require.NoError(t, err, "left on the cluster, as the status says")
	_, err = adminOf(t, up).CoreV1().Namespaces().Get(context.Background(), "forced-ns", metav1.GetOptions{})
	require.Error(t, err, "deleted where it could be")

	// Applied again, the logical cloud takes its objects back; terminated
	// normally, everything goes; then it can be deleted.
	r.Want(202, "POST", lc+"/apply", "")
	r.Settle(lc, "Instantiated")
	r.Want(202, "POST", lc+"/terminate", "")
	r.Settle(lc, "Terminated")
	apitest.Eventually(t, "the namespace is gone from "+down.Name, func() bool {
		_, err := adminOf(t, down).CoreV1().Namespaces().Get(context.Background(), "forced-ns", metav1.GetOptions{})
		return err != nil
	})
	r.Want(204, "DELETE", lc, "")
}
