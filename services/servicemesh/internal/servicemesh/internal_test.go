package servicemesh_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/servicemesh/internal/servicemesh"
)

// A logical cloud without a mesh (spec off, no control plane record) gets
// enabled=false and nothing else; releasing and purging it is harmless.
func TestNoMeshIsDisabled(t *testing.T) {
	t.Parallel()
	conn := servertest.Serve(t, func(st *store.Store) []server.Service {
		svc := servicemesh.New(st, nil, servicemesh.DefaultOptions)
		return []server.Service{svc, svc.Internal()}
	})
	c := servicemeshv1.NewServiceMeshInternalServiceClient(conn)
	ctx := context.Background()
	resp, err := c.RenderControlPlanes(ctx, &servicemeshv1.RenderControlPlanesRequest{
		Project: "p", LogicalCloud: "lc1", Namespace: "lc1-ns", Level: "standard",
		Clusters: []*servicemeshv1.MeshTarget{{Provider: "edge", Cluster: "c1"}},
	})
	require.NoError(t, err)
	require.False(t, resp.GetEnabled())
	require.Empty(t, resp.GetClusters())
	require.Empty(t, resp.GetCrds())
	require.Empty(t, resp.GetRevision())
	for range 2 {
		_, err = c.ReleaseControlPlanes(ctx, &servicemeshv1.ReleaseControlPlanesRequest{Project: "p", LogicalCloud: "lc1"})
		require.NoError(t, err)
		_, err = c.PurgeLogicalCloud(ctx, &servicemeshv1.PurgeLogicalCloudRequest{Project: "p", LogicalCloud: "lc1"})
		require.NoError(t, err)
	}
}
