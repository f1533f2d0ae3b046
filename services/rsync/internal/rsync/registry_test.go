package rsync_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
	"github.com/dcm-project/dcm/services/rsync/internal/rsync"
)

// TestWatchClusters: the registry stream starts with every cluster, then
// sends each registration, label change and deletion, whether made
// through the watched replica (at once) or through another replica on the
// same store (at its next read of the registry).
func TestWatchClusters(t *testing.T) {
	t.Parallel()
	var other *rsync.Service
	c := newClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		s := rsync.New(st, engine.Config{}, zap.NewNop())
		s.RegistryPoll = time.Hour // another replica's change is seen at this one's next change
		other = rsync.New(st, engine.Config{}, zap.NewNop())
		return []server.Service{s}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.CreateClusterProvider(ctx, &rsyncv1.CreateClusterProviderRequest{
		ClusterProvider: &rsyncv1.ClusterProvider{Metadata: &typesv1.Metadata{Name: "edge"}}})
	require.NoError(t, err)
	cluster := func(name string, labels ...string) *rsyncv1.Cluster {
		return &rsyncv1.Cluster{Metadata: &typesv1.Metadata{Name: name},
			Spec: &rsyncv1.ClusterSpec{Kubeconfig: kubeconfig(t, "https://127.0.0.1:1", ""), Labels: labels}}
	}
	_, err = c.CreateCluster(ctx, &rsyncv1.CreateClusterRequest{Provider: "edge", Cluster: cluster("c1", "edge")})
	require.NoError(t, err)

	w, err := c.WatchClusters(ctx, &rsyncv1.WatchClustersRequest{})
	require.NoError(t, err)
	type change struct {
		kind             rsyncv1.ClusterChange_Kind
		cluster          string
		labels, previous []string
	}
	next := func() (bool, []change) {
		t.Helper()
		m, err := w.Recv()
		require.NoError(t, err)
		var out []change
		for _, ch := range m.GetChanges() {
			require.Equal(t, "edge", ch.GetProvider())
			out = append(out, change{ch.GetKind(), ch.GetCluster(), ch.GetLabels(), ch.GetPreviousLabels()})
		}
		return m.GetInitial(), out
	}
	initial, got := next()
	require.True(t, initial)
	require.Equal(t, []change{{rsyncv1.ClusterChange_KIND_ADDED, "c1", []string{"edge"}, nil}}, got)

	_, err = c.CreateCluster(ctx, &rsyncv1.CreateClusterRequest{Provider: "edge", Cluster: cluster("c2", "edge", "gpu")})
	require.NoError(t, err)
	initial, got = next()
	require.False(t, initial)
	require.Equal(t, []change{{rsyncv1.ClusterChange_KIND_ADDED, "c2", []string{"edge", "gpu"}, nil}}, got)

	_, err = c.UpdateCluster(ctx, &rsyncv1.UpdateClusterRequest{Provider: "edge", Name: "c1",
		Cluster: &rsyncv1.Cluster{Metadata: &typesv1.Metadata{Name: "c1"}, Spec: &rsyncv1.ClusterSpec{Labels: []string{"core"}}}})
	require.NoError(t, err)
	_, got = next()
	require.Equal(t, []change{{rsyncv1.ClusterChange_KIND_LABELS_CHANGED, "c1", []string{"core"}, []string{"edge"}}}, got)

	// Through the other replica: this one sees it when it reads the
	// registry again (here at its own next change, the poll being long).
	_, err = other.CreateCluster(ctx, &rsyncv1.CreateClusterRequest{Provider: "edge", Cluster: cluster("c3", "edge")})
	require.NoError(t, err)
	_, err = c.DeleteCluster(ctx, &rsyncv1.DeleteClusterRequest{Provider: "edge", Name: "c2"})
	require.NoError(t, err)
	_, got = next()
	require.Equal(t, []change{
		{rsyncv1.ClusterChange_KIND_DELETED, "c2", nil, []string{"edge", "gpu"}},
		{rsyncv1.ClusterChange_KIND_ADDED, "c3", []string{"edge"}, nil},
	}, got)
}

// TestWatchClustersPolls: a change made through another replica reaches
// a watch within its RegistryPoll, with no change on the watched one.
func TestWatchClustersPolls(t *testing.T) {
	t.Parallel()
	var other *rsync.Service
	c := newClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		s := rsync.New(st, engine.Config{}, zap.NewNop())
		s.RegistryPoll = 100 * time.Millisecond
		other = rsync.New(st, engine.Config{}, zap.NewNop())
		return []server.Service{s}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := c.WatchClusters(ctx, &rsyncv1.WatchClustersRequest{})
	require.NoError(t, err)
	m, err := w.Recv()
	require.NoError(t, err)
	require.True(t, m.GetInitial())
	require.Empty(t, m.GetChanges())
	_, err = other.CreateClusterProvider(ctx, &rsyncv1.CreateClusterProviderRequest{
		ClusterProvider: &rsyncv1.ClusterProvider{Metadata: &typesv1.Metadata{Name: "edge"}}})
	require.NoError(t, err)
	_, err = other.CreateCluster(ctx, &rsyncv1.CreateClusterRequest{Provider: "edge", Cluster: &rsyncv1.Cluster{Metadata: &typesv1.Metadata{Name: "c1"},
		Spec: &rsyncv1.ClusterSpec{Kubeconfig: kubeconfig(t, "https://127.0.0.1:1", ""), Labels: []string{"edge"}}}})
	require.NoError(t, err)
	m, err = w.Recv()
	require.NoError(t, err)
	require.Len(t, m.GetChanges(), 1)
	require.Equal(t, "c1", m.GetChanges()[0].GetCluster())
	require.Equal(t, rsyncv1.ClusterChange_KIND_ADDED, m.GetChanges()[0].GetKind())
}
