package namespace_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	"github.com/dcm-project/dcm/platform/coretest"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/namespace/internal/namespace"
)

func TestRenderNamespace(t *testing.T) {
	t.Parallel()
	core := coretest.New()
	c := namespacev1.NewNamespaceServiceClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		return []server.Service{namespace.New(st, core)}
	}))
	ctx := context.Background()
	core.Add("p", "lc", kube.LevelStandard, "ns-1")
	core.Add("p", "adm", kube.LevelAdmin, "")
	_, err := c.CreateNamespace(ctx, &namespacev1.CreateNamespaceRequest{Project: "p", LogicalCloud: "lc", Namespace: &namespacev1.Namespace{Name: "ns-1"}})
	require.NoError(t, err)
	render := func(lc string) (*namespacev1.RenderNamespaceResponse, error) {
		return c.RenderNamespace(ctx, &namespacev1.RenderNamespaceRequest{Project: "p", LogicalCloud: lc})
	}

	r, err := render("lc")
	require.NoError(t, err)
	require.Len(t, r.GetManifests(), 1)
	require.JSONEq(t, `{"apiVersion": "v1", "kind": "Namespace",
 "metadata": {"name": "ns-1", "labels": {"dcm.io/project": "p", "dcm.io/logical-cloud": "lc"}}}`, r.GetManifests()[0])
	again, err := render("lc")
	require.NoError(t, err)
	require.Equal(t, r.GetManifests(), again.GetManifests(), "byte-identical")

	_, err = render("adm")
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), "admin logical cloud has no namespace")
	_, err = render("missing")
	require.Equal(t, codes.NotFound, status.Code(err))

	_, err = c.DeleteNamespaces(ctx, &namespacev1.DeleteNamespacesRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	_, err = render("lc")
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), `logical cloud "lc" has no namespace`)
}
