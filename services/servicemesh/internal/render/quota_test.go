package render_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dcm-project/dcm/services/servicemesh/internal/render"
)

// TestMeshFitsItsQuota: every autoscaler of the rendered mesh is capped,
// every container of its Deployments has requests and limits, and the
// ResourceQuota holds each Deployment at its autoscaler's cap plus one pod
// (a rolling update), summed from the rendered objects themselves (a chart
// update that raises a figure fails here, not on a cluster).
func TestMeshFitsItsQuota(t *testing.T) {
	t.Parallel()
	in := input("p1", "lc1", "lc1-istio-system")
	out, err := render.Render(in)
	require.NoError(t, err)
	caps := map[string]int64{}
	var deployments []map[string]any
	var hard map[string]any
	for _, m := range out[0].Manifests {
		o := parse(t, m.JSON)
		switch o.Kind {
		case "HorizontalPodAutoscaler":
			spec := o.raw["spec"].(map[string]any)
			target := spec["scaleTargetRef"].(map[string]any)["name"].(string)
			maxReplicas := int64(spec["maxReplicas"].(float64))
			want := int64(render.GatewayMaxReplicas)
			if target == "istiod-"+in.Revision {
				want = render.IstiodMaxReplicas
			}
			require.Equal(t, want, maxReplicas, "HPA %s", o.Metadata.Name)
			caps[target] = maxReplicas
		case "Deployment":
			deployments = append(deployments, o.raw)
		case "ResourceQuota":
			require.Equal(t, render.QuotaName, o.Metadata.Name)
			hard = o.raw["spec"].(map[string]any)["hard"].(map[string]any)
		}
	}
	require.Len(t, deployments, 4)
	require.NotNil(t, hard)
	sum := map[string]*resource.Quantity{}
	add := func(k string, q resource.Quantity, n int64) {
		if sum[k] == nil {
			sum[k] = resource.NewQuantity(0, resource.DecimalSI)
		}
		for range n {
			sum[k].Add(q)
		}
	}
	pods := int64(0)
	for _, d := range deployments {
		name := d["metadata"].(map[string]any)["name"].(string)
		c, ok := caps[name]
		require.True(t, ok, "Deployment %s has an autoscaler", name)
		n := c + 1
		pods += n
		spec := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		for _, ci := range spec["containers"].([]any) {
			cont := ci.(map[string]any)
			res, _ := cont["resources"].(map[string]any)
			for _, kind := range []string{"requests", "limits"} {
				figures, _ := res[kind].(map[string]any)
				for _, r := range []string{"cpu", "memory"} {
					v, ok := figures[r].(string)
					require.True(t, ok, "%s/%s has %s.%s", name, cont["name"], kind, r)
					add(kind+"."+r, resource.MustParse(v), n)
				}
			}
		}
	}
	podsHard := resource.MustParse(hard["pods"].(string))
	require.Equal(t, pods, podsHard.Value())
	for k, want := range sum {
		got := resource.MustParse(hard[k].(string))
		require.Zero(t, want.Cmp(got), "%s: the quota says %s, the Deployments at their caps plus one need %s", k, got.String(), want.String())
	}
	t.Logf("quota %v holds %d pods", hard, pods)
}
