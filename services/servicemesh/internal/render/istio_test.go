package render_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest/istiotest"
	"github.com/dcm-project/dcm/services/servicemesh/internal/render"
)

// TestIstioValidatesMeshObjects: the objects of Istio's own API groups
// that DCM writes around the charts (the cross-network Gateway and the
// workload namespace's deny-all AuthorizationPolicy) pass the pinned
// Istio's config validation, with no warning.
func TestIstioValidatesMeshObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("builds istio-validate; skipped with -short")
	}
	out, err := render.Render(input("p1", "lc1", "lc1-istio-system"))
	require.NoError(t, err)
	var ms []string
	kinds := map[string]int{}
	for _, m := range out[0].Manifests {
		var o struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		require.NoError(t, json.Unmarshal([]byte(m.JSON), &o))
		if strings.Contains(o.APIVersion, ".istio.io/") {
			ms = append(ms, m.JSON)
			kinds[o.Kind]++
		}
	}
	require.Equal(t, map[string]int{"Gateway": 1, "AuthorizationPolicy": 1}, kinds)
	findings := istiotest.Validate(t, ms)
	require.Len(t, findings, 2)
}
