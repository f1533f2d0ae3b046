package namespace_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/namespace/internal/namespace"
)

func TestNamespaces(t *testing.T) {
	t.Parallel()
	c := namespacev1.NewNamespaceServiceClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		return []server.Service{namespace.New(st)}
	}))
	ctx := context.Background()
	create := func(lc, name string, labels ...*namespacev1.Label) error {
		_, err := c.CreateNamespace(ctx, &namespacev1.CreateNamespaceRequest{Project: "p", LogicalCloud: lc,
			Namespace: &namespacev1.Namespace{Name: name, Labels: labels}})
		return err
	}
	require.NoError(t, create("lc1", "ns-1", &namespacev1.Label{Key: "dcm.example.com/logical-cloud", Value: "lc1"}))
	require.Equal(t, codes.AlreadyExists, status.Code(create("lc1", "ns-2")), "one namespace per logical cloud")

	got, err := c.GetNamespace(ctx, &namespacev1.GetNamespaceRequest{Project: "p", LogicalCloud: "lc1"})
	require.NoError(t, err)
	require.Equal(t, "ns-1", got.GetNamespace().GetName())
	require.Equal(t, "dcm.example.com/logical-cloud", got.GetNamespace().GetLabels()[0].GetKey())

	for _, b := range []struct {
		name  string
		label *namespacev1.Label
		field string
	}{
		{"NS", nil, "namespace.name"},
		{"ns", &namespacev1.Label{Key: "bad key!", Value: "v"}, "namespace.labels[0].key"},
		{"ns", &namespacev1.Label{Key: "k", Value: "bad value!"}, "namespace.labels[0].value"},
	} {
		var labels []*namespacev1.Label
		if b.label != nil {
			labels = append(labels, b.label)
		}
		st, _ := status.FromError(create("lc2", b.name, labels...))
		require.Equal(t, codes.InvalidArgument, st.Code())
		require.Equal(t, b.field, errs.FieldOf(st))
	}
	_, err = c.GetNamespace(ctx, &namespacev1.GetNamespaceRequest{Project: "p", LogicalCloud: "lc2"})
	require.Equal(t, codes.NotFound, status.Code(err), "nothing stored for bad input")

	_, err = c.DeleteNamespace(ctx, &namespacev1.DeleteNamespaceRequest{Project: "p", LogicalCloud: "lc1"})
	require.NoError(t, err)
	_, err = c.DeleteNamespace(ctx, &namespacev1.DeleteNamespaceRequest{Project: "p", LogicalCloud: "lc1"})
	require.Equal(t, codes.NotFound, status.Code(err))
}
