package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// simRollout puts manifests on every simulated cluster.
func simRollout(sims engine.SimulatedClusters, manifests []string) []*rsyncv1.ClusterResources {
	var out []*rsyncv1.ClusterResources
	for i := range len(sims) {
		cr := &rsyncv1.ClusterResources{Provider: "sim", Cluster: fmt.Sprintf("c%d", i)}
		for _, m := range manifests {
			cr.Resources = append(cr.Resources, &rsyncv1.Resource{Manifest: m})
		}
		out = append(out, cr)
	}
	return out
}

func newSims(n int, failureRate float64) engine.SimulatedClusters {
	sims := engine.SimulatedClusters{}
	for i := range n {
		sims[fmt.Sprintf("sim/c%d", i)] = &engine.Simulated{FailureRate: failureRate}
	}
	return sims
}

func calls(sims engine.SimulatedClusters) (n int64) {
	for _, s := range sims {
		n += s.Calls.Load()
	}
	return n
}

func TestFlakyClustersConverge(t *testing.T) {
	t.Parallel()
	sims := newSims(20, 0.3)
	cfg := testConfig
	cfg.RetryBase, cfg.RetryMax = 5*time.Millisecond, 50*time.Millisecond
	e := engine.New(storetest.Open(t), sims, cfg, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	set := configMaps("flaky", 7)
	_, err := e.Submit(ctx, "lc/p/flaky", simRollout(sims, set))
	require.NoError(t, err)
	st := waitFor(t, e, "lc/p/flaky", "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	require.EqualValues(t, 20*8, st.GetReady())
	for k, s := range sims {
		require.Equal(t, 8, s.Objects(), k)
	}
	require.Greater(t, calls(sims), int64(20*8), "30%% of calls failed and were retried")
}

func TestUpdateAppliesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	sims := newSims(3, 0)
	e := runEngine(t, storetest.Open(t), sims)
	ctx := context.Background()
	set := configMaps("diff", 5)
	_, err := e.Submit(ctx, "lc/p/diff", simRollout(sims, set))
	require.NoError(t, err)
	waitFor(t, e, "lc/p/diff", "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	before := calls(sims)

	// One manifest changed, one dropped, and cluster c2 left out.
	next := append([]string{}, set[:4]...)
	next[1] = `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-000", "namespace": "diff"}, "data": {"i": "changed"}}`
	update := simRollout(sims, next)[:2]
	_, err = e.Update(ctx, "lc/p/diff", update)
	require.NoError(t, err)
	st := waitFor(t, e, "lc/p/diff", "updated", func(st *rsyncv1.RolloutStatus) bool {
		return st.GetGeneration() == 2 && settledIn(rsyncv1.State_STATE_APPLIED)(st)
	})
	// c0, c1: 1 apply (a read of the object's owner, then the apply) + 2
	// deletes (a read of the owner, the delete, a read to see it gone);
	// c2: 6 objects deleted, 3 calls each.
	require.Equal(t, int64(2*(2+2*3)+6*3), calls(sims)-before, "unchanged resources are not applied again")
	require.Equal(t, 4, sims["sim/c0"].Objects())
	require.Equal(t, 0, sims["sim/c2"].Objects())
	require.Equal(t, rsyncv1.State_STATE_DELETED, st.GetClusters()[2].GetState())
	var states []string
	for _, r := range st.GetClusters()[0].GetResources() {
		states = append(states, fmt.Sprintf("%s %s %s", r.GetName(), r.GetOperation(), r.GetState()))
	}
	require.Equal(t, []string{
		"diff OPERATION_APPLY STATE_APPLIED", "cm-000 OPERATION_APPLY STATE_APPLIED", "cm-001 OPERATION_APPLY STATE_APPLIED",
		"cm-002 OPERATION_APPLY STATE_APPLIED", "cm-003 OPERATION_DELETE STATE_DELETED", "cm-004 OPERATION_DELETE STATE_DELETED",
	}, states)

	// Errors name the owner's state: updating a deleted rollout is refused.
	_, err = e.Delete(ctx, "lc/p/diff")
	require.NoError(t, err)
	waitFor(t, e, "lc/p/diff", "deleted", settledIn(rsyncv1.State_STATE_DELETED))
	_, err = e.Update(ctx, "lc/p/diff", update)
	require.ErrorContains(t, err, "is deleted")
}
