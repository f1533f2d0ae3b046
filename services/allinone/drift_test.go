package allinone_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// TestDriftShownAndRepaired deletes, by hand, a Role a logical cloud put
// on a cluster: the logical cloud's status lists the drift (which object,
// deleted, repaired) and the Role is back.
func TestDriftShownAndRepaired(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	r := apitest.NewREST(t, stacktest.Start(t))
	apitest.RegisterHarness(t, r, h)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"drift"}}`)
	lc := "/v2/projects/drift/logical-clouds/lc-d"
	r.Want(201, "POST", "/v2/projects/drift/logical-clouds", `{"metadata": {"name": "lc-d"}, "spec": {"namespace": "drift-ns",
	  "user": {"user-name": "robot", "type": "token", "user-permissions": [
	    {"permission-name": "cm", "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}}}`)
	c := h.Clusters[0]
	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+c.Name+`"}`)
	r.Want(202, "POST", lc+"/apply", "")
	r.Settle(lc, "Instantiated")

	ctx := context.Background()
	cs := adminOf(t, c)
	roles, err := cs.RbacV1().Roles("drift-ns").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, roles.Items)
	role := roles.Items[0].Name
	require.NoError(t, cs.RbacV1().Roles("drift-ns").Delete(ctx, role, metav1.DeleteOptions{}))

	type drift struct {
		Kind     string `json:"kind"`
		Name     string `json:"name"`
		Deleted  bool   `json:"deleted"`
		Repaired bool   `json:"repaired"`
	}
	apitest.Eventually(t, "the deleted Role is listed as drift, repaired, and back on the cluster", func() bool {
		var st struct {
			Clusters []struct {
				Drift []drift `json:"drift"`
			} `json:"clusters"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/status", "")), &st))
		for _, cl := range st.Clusters {
			for _, d := range cl.Drift {
				if d.Kind == "Role" && d.Name == role && d.Deleted && d.Repaired {
					_, err := cs.RbacV1().Roles("drift-ns").Get(ctx, role, metav1.GetOptions{})
					return err == nil
				}
			}
		}
		return false
	})
	r.Want(202, "POST", lc+"/terminate", "")
	r.Settle(lc, "Terminated")
	r.Want(204, "DELETE", lc, "")
}
