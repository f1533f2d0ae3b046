package core

import (
	"testing"

	"github.com/stretchr/testify/require"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// TestStatusViewNamesDownClusters: a cluster rsync's probes say is down
// has its health in the logical cloud's status, and its last-errors line
// says so; a cluster that is up has neither.
func TestStatusViewNamesDownClusters(t *testing.T) {
	t.Parallel()
	st := statusView("p", "lc", phaseApplying, &rsyncv1.RolloutStatus{Clusters: []*rsyncv1.RolloutClusterStatus{
		{Provider: "edge", Cluster: "c1", State: rsyncv1.State_STATE_RETRYING, LastError: "connection refused", Health: "Unreachable"},
		{Provider: "edge", Cluster: "c2", State: rsyncv1.State_STATE_RETRYING, LastError: "conflict"},
	}})
	require.Equal(t, "Unreachable", st.GetClusters()[0].GetHealth())
	require.Empty(t, st.GetClusters()[1].GetHealth())
	require.Equal(t, []string{"edge/c1 (Unreachable): connection refused", "edge/c2: conflict"}, st.GetLastErrors())
}
