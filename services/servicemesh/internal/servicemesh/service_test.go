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

func TestControlPlaneNamespaceDefault(t *testing.T) {
	t.Parallel()
	c := servicemeshv1.NewServiceMeshServiceClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		return []server.Service{servicemesh.New(st, nil, servicemesh.DefaultOptions)}
	}))
	ctx := context.Background()
	resp, err := c.CreateControlPlane(ctx, &servicemeshv1.CreateControlPlaneRequest{Project: "p", ControlPlane: &servicemeshv1.ControlPlane{Name: "lc1"}})
	require.NoError(t, err)
	require.Equal(t, "lc1-istio-system", resp.GetControlPlane().GetNamespace())
	_, err = c.CreateControlPlane(ctx, &servicemeshv1.CreateControlPlaneRequest{Project: "p", ControlPlane: &servicemeshv1.ControlPlane{Name: "lc2", Namespace: "mesh"}})
	require.NoError(t, err)
	list, err := c.ListControlPlanes(ctx, &servicemeshv1.ListControlPlanesRequest{Project: "p"})
	require.NoError(t, err)
	require.Len(t, list.GetControlPlanes(), 2)
	require.Equal(t, "mesh", list.GetControlPlanes()[1].GetNamespace())
}
