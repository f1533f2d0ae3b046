package rsync_test

import (
	"context"
	"go.uber.org/zap"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
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

func TestClusterProviders(t *testing.T) {
	t.Parallel()
	c := newClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		return []server.Service{rsync.New(st, engine.Config{}, zap.NewNop())}
	}))
	ctx := context.Background()
	create := func(name string) error {
		_, err := c.CreateClusterProvider(ctx, &rsyncv1.CreateClusterProviderRequest{
			ClusterProvider: &rsyncv1.ClusterProvider{Metadata: &typesv1.Metadata{Name: name, Description: "edge sites"}}})
		return err
	}
	require.NoError(t, create("edge-b"))
	require.NoError(t, create("edge-a"))
	require.Equal(t, codes.AlreadyExists, status.Code(create("edge-a")))
	require.Equal(t, codes.InvalidArgument, status.Code(create("")))
	list, err := c.ListClusterProviders(ctx, &rsyncv1.ListClusterProvidersRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetClusterProviders(), 2)
	require.Equal(t, "edge-a", list.GetClusterProviders()[0].GetMetadata().GetName(), "ordered by name")
	_, err = c.DeleteClusterProvider(ctx, &rsyncv1.DeleteClusterProviderRequest{Name: "edge-a"})
	require.NoError(t, err)
	_, err = c.GetClusterProvider(ctx, &rsyncv1.GetClusterProviderRequest{Name: "edge-a"})
	require.Equal(t, codes.NotFound, status.Code(err))
}

// client is rsync's public and internal API on one connection.
type client struct {
	rsyncv1.RsyncServiceClient
	rsyncv1.RsyncInternalServiceClient
}

func newClient(conn grpc.ClientConnInterface) client {
	return client{rsyncv1.NewRsyncServiceClient(conn), rsyncv1.NewRsyncInternalServiceClient(conn)}
}
