package core

import (
	"testing"

	"github.com/stretchr/testify/require"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// TestOwnersHidden: a tenant's messages name a holder of its own project,
// never another project's (issue 29, low).
func TestOwnersHidden(t *testing.T) {
	require.Equal(t, "another project", ownerFor("pb", "lc/pa/lc"))
	require.Equal(t, "another project", ownerFor("pb", "traffic/pa/rb/v1/g"))
	require.Equal(t, `logical cloud "lc" of project "pb"`, ownerFor("pb", "lc/pb/lc"))

	for msg, want := range map[string]string{
		`Namespace "ns-a" is managed by lc/pa/lc: refused`:                               `Namespace "ns-a" is managed by another project: refused`,
		`left on the cluster, not deleted: Namespace "ns-a" is managed by lc/pa/lc`:      `left on the cluster, not deleted: Namespace "ns-a" is managed by another project`,
		`ConfigMap "x/y" is managed by traffic/pa/rb/v1/g: refused`:                      `ConfigMap "x/y" is managed by another project: refused`,
		`Namespace "ns-b" is managed by lc/pb/other: refused`:                            `Namespace "ns-b" is managed by lc/pb/other: refused`,
		`CustomResourceDefinition "a.istio.io" is managed by mesh/edge/c1: refused`:      `CustomResourceDefinition "a.istio.io" is managed by mesh/edge/c1: refused`,
		`ClusterRole "dcm.mesh.revision.x" is managed by lc/pa-2/x.y: refused; and more`: `ClusterRole "dcm.mesh.revision.x" is managed by another project: refused; and more`,
	} {
		got, _ := hideOwners("pb", msg)
		require.Equal(t, want, got)
	}
	require.Equal(t, []string{"dcm/another project", "dcm/lc/pb/x", "kubectl", "dcm/mesh/edge/c1"},
		hiddenManagers("pb", []string{"dcm/lc/pa/x", "dcm/lc/pb/x", "kubectl", "dcm/mesh/edge/c1"}))

	// The status a tenant reads: cluster, resource and drift messages.
	refused := `Namespace "ns-a" is managed by lc/pa/lc: refused`
	st := statusView("pb", "x", phaseApplying, &rsyncv1.RolloutStatus{Clusters: []*rsyncv1.RolloutClusterStatus{{
		Provider: "edge", Cluster: "c1", LastError: refused,
		Resources: []*rsyncv1.ResourceStatus{{Kind: "Namespace", Name: "ns-a", LastError: refused}},
		Drift:     []*rsyncv1.Drift{{Kind: "ConfigMap", Managers: []string{"dcm/lc/pa/lc"}, Error: refused}},
	}}})
	text := st.String()
	require.NotContains(t, text, "pa/")
	require.Contains(t, st.GetLastErrors()[0], "managed by another project")
	require.Equal(t, []string{"dcm/another project"}, st.GetClusters()[0].GetDrift()[0].GetManagers())
}
