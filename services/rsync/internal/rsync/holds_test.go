package rsync_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
	"github.com/dcm-project/dcm/services/rsync/internal/rsync"
)

// TestDeleteHeldCluster: rsync decides from its own records, calling no
// other service, whether a cluster may go: refused (naming the logical
// clouds) while an owner holds it (core's HoldCluster for a cluster
// reference); allowed once released. (A rollout alone does not hold its
// clusters: TestDeleteClusterLeavesTenantObjects.)
func TestDeleteHeldCluster(t *testing.T) {
	t.Parallel()
	c := newClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		return []server.Service{rsync.New(st, engine.Config{}, zap.NewNop())}
	}))
	ctx := context.Background()
	_, err := c.CreateClusterProvider(ctx, &rsyncv1.CreateClusterProviderRequest{
		ClusterProvider: &rsyncv1.ClusterProvider{Metadata: &typesv1.Metadata{Name: "edge"}}})
	require.NoError(t, err)
	for _, name := range []string{"c1", "c2"} {
		_, err = c.CreateCluster(ctx, &rsyncv1.CreateClusterRequest{Provider: "edge", Cluster: &rsyncv1.Cluster{
			Metadata: &typesv1.Metadata{Name: name}, Spec: &rsyncv1.ClusterSpec{Kubeconfig: kubeconfig(t, "https://127.0.0.1:1", "")}}})
		require.NoError(t, err)
	}
	hold := func(owner, cluster string) error {
		_, err := c.HoldCluster(ctx, &rsyncv1.HoldClusterRequest{Owner: owner, Provider: "edge", Cluster: cluster})
		return err
	}
	del := func(cluster string) error {
		_, err := c.DeleteCluster(ctx, &rsyncv1.DeleteClusterRequest{Provider: "edge", Name: cluster})
		return err
	}

	require.NoError(t, hold("lc/p/a", "c1"))
	require.NoError(t, hold("lc/p/a", "c1"), "holding twice is harmless")
	require.NoError(t, hold("lc/q/b", "c1"))
	require.Equal(t, codes.NotFound, status.Code(hold("lc/p/a", "c9")), "a missing cluster cannot be held")
	err = del("c1")
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), "p/a, q/b")
	_, err = c.GetCluster(ctx, &rsyncv1.GetClusterRequest{Provider: "edge", Name: "c1"})
	require.NoError(t, err, "a refused delete leaves the cluster")

	one, err := c.ReleaseClusters(ctx, &rsyncv1.ReleaseClustersRequest{Owner: "lc/q/b", Provider: "edge", Cluster: "c1"})
	require.NoError(t, err)
	require.EqualValues(t, 1, one.GetRemoved())
	require.NoError(t, hold("lc/p/a", "c2"))
	all, err := c.ReleaseClusters(ctx, &rsyncv1.ReleaseClustersRequest{Owner: "lc/p/a"})
	require.NoError(t, err)
	require.EqualValues(t, 2, all.GetRemoved(), "every cluster the owner held")

	require.NoError(t, del("c1"))
	require.NoError(t, del("c2"))
	require.Equal(t, codes.NotFound, status.Code(hold("lc/p/a", "c1")), "a deleted cluster cannot be held")
}
