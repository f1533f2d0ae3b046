package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// clusterIn finds a cluster's status by name.
func clusterIn(st *rsyncv1.RolloutStatus, name string) *rsyncv1.RolloutClusterStatus {
	for _, c := range st.GetClusters() {
		if c.GetCluster() == name {
			return c
		}
	}
	return &rsyncv1.RolloutClusterStatus{}
}

// TestForcedDeletionOrphans deletes a rollout while one of its clusters is
// down: the deletion waits for it, a forced deletion settles at once with
// what is left there ORPHANED (and left: the cluster still holds it when
// it is back), and the rollout can be submitted again and deleted for good.
func TestForcedDeletionOrphans(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	e := runEngine(t, storetest.Open(t), newKubeClusters(h))
	ctx := context.Background()
	const owner, ns = "lc/p/forced", "tenant-forced"
	up, down := h.Clusters[0], h.Clusters[1]
	_, err := e.Submit(ctx, owner, rollout(h, configMaps(ns, 3), 0, 1))
	require.NoError(t, err)
	waitFor(t, e, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))

	down.StopAPIServer()
	restarted := false
	defer func() {
		if !restarted {
			require.NoError(t, down.StartAPIServer(context.Background()))
		}
	}()
	_, err = e.Delete(ctx, owner)
	require.NoError(t, err)
	waitFor(t, e, owner, "deleted where it can be, retrying on the cluster that is down", func(st *rsyncv1.RolloutStatus) bool {
		return clusterIn(st, up.Name).GetState() == rsyncv1.State_STATE_DELETED &&
			clusterIn(st, down.Name).GetState() == rsyncv1.State_STATE_RETRYING && !st.GetSettled()
	})

	_, err = e.DeleteForced(ctx, owner, true)
	require.NoError(t, err)
	st := waitFor(t, e, owner, "settled by force", settledIn(rsyncv1.State_STATE_ORPHANED))
	require.True(t, st.GetDeleting())
	require.Equal(t, rsyncv1.State_STATE_DELETED, clusterIn(st, up.Name).GetState())
	left := clusterIn(st, down.Name)
	require.Equal(t, rsyncv1.State_STATE_ORPHANED, left.GetState())
	require.Len(t, left.GetResources(), 4, "what may remain is listed")
	for _, r := range left.GetResources() {
		require.Equal(t, rsyncv1.State_STATE_ORPHANED, r.GetState(), r.GetName())
		require.Contains(t, r.GetLastError(), "deletion forced")
	}
	require.Zero(t, countConfigMaps(t, up, ns))

	require.NoError(t, down.StartAPIServer(ctx))
	restarted = true
	require.Equal(t, 3, countConfigMaps(t, down, ns), "left on the cluster, as reported")

	// Submitted again, the rollout takes its objects back; deleted, they go.
	_, err = e.Submit(ctx, owner, rollout(h, configMaps(ns, 3), 0, 1))
	require.NoError(t, err)
	waitFor(t, e, owner, "applied again", settledIn(rsyncv1.State_STATE_APPLIED))
	cleanup(t, e, owner)
	require.Zero(t, countConfigMaps(t, down, ns))
}

// TestUnregisteredClusterOrphans drops a cluster from a rollout while it
// is down, so its deletion waits; once the cluster is deleted from the
// registry its resources are ORPHANED and the rollout settles as applied.
func TestUnregisteredClusterOrphans(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	conn := newKubeClusters(h)
	e := runEngine(t, storetest.Open(t), conn)
	ctx := context.Background()
	const owner, ns = "lc/p/unregistered", "tenant-unregistered"
	down := h.Clusters[2]
	_, err := e.Submit(ctx, owner, rollout(h, configMaps(ns, 2), 0, 2))
	require.NoError(t, err)
	waitFor(t, e, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))

	down.StopAPIServer()
	defer func() {
		require.NoError(t, down.StartAPIServer(context.Background()))
		// What was orphaned there stays; the shared clusters are cleaned for the next test.
		_ = clientset(t, down).CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	}()
	_, err = e.Update(ctx, owner, rollout(h, configMaps(ns, 2), 0))
	require.NoError(t, err)
	waitFor(t, e, owner, "waiting for the dropped cluster", func(st *rsyncv1.RolloutStatus) bool {
		return clusterIn(st, down.Name).GetState() == rsyncv1.State_STATE_RETRYING && !st.GetSettled()
	})

	conn.unregister("edge", down.Name)
	st := waitFor(t, e, owner, "settled without the unregistered cluster", settledIn(rsyncv1.State_STATE_APPLIED))
	gone := clusterIn(st, down.Name)
	require.Equal(t, rsyncv1.State_STATE_ORPHANED, gone.GetState())
	for _, r := range gone.GetResources() {
		require.Equal(t, rsyncv1.State_STATE_ORPHANED, r.GetState(), r.GetName())
		require.Contains(t, r.GetLastError(), "deleted from the registry")
	}
	// Deleted, the rollout settles with the orphans still listed.
	_, err = e.Delete(ctx, owner)
	require.NoError(t, err)
	st = waitFor(t, e, owner, "deleted", settledIn(rsyncv1.State_STATE_ORPHANED))
	require.Equal(t, rsyncv1.State_STATE_DELETED, clusterIn(st, h.Clusters[0].Name).GetState())
	require.Equal(t, rsyncv1.State_STATE_ORPHANED, clusterIn(st, down.Name).GetState())
}
