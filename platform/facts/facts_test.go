package facts_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// TestFacts: puts replace and repeat harmlessly; a logical cloud marked
// deleting, forgotten or never told is NotFound with core's message; a
// put without its names is refused naming the field.
func TestFacts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := facts.Open(storetest.Open(t), "svc")

	_, err := f.Parent(ctx, "p", "lc")
	require.Equal(t, codes.NotFound, errs.Code(err))
	require.ErrorContains(t, err, `logical cloud "lc" not found in project "p"`)

	put := &typesv1.LogicalCloudFacts{Project: "p", Name: "lc", Level: "standard", Namespace: "ns-1"}
	require.NoError(t, f.Put(ctx, put))
	require.NoError(t, f.Put(ctx, put), "the same facts again")
	got, err := f.Parent(ctx, "p", "lc")
	require.NoError(t, err)
	require.Equal(t, "ns-1", got.GetNamespace())

	put.Clusters = []string{"edge/c1"}
	require.NoError(t, f.Put(ctx, put))
	got, err = f.Parent(ctx, "p", "lc")
	require.NoError(t, err)
	require.Equal(t, []string{"edge/c1"}, got.GetClusters(), "replaced")
	require.NoError(t, f.Check("p", "lc")(ctx))

	require.NoError(t, f.Put(ctx, &typesv1.LogicalCloudFacts{Project: "p", Name: "lc", Deleting: true}))
	_, err = f.Parent(ctx, "p", "lc")
	require.Equal(t, codes.NotFound, errs.Code(err), "being deleted: as if it did not exist")
	require.Equal(t, codes.NotFound, errs.Code(f.Check("p", "lc")(ctx)))

	require.NoError(t, f.Delete(ctx, "p", "lc"))
	require.NoError(t, f.Delete(ctx, "p", "lc"), "forgetting again")
	_, err = f.Parent(ctx, "p", "lc")
	require.Equal(t, codes.NotFound, errs.Code(err))

	require.Equal(t, "facts.project", errs.FieldOf(statusOf(t, f.Put(ctx, &typesv1.LogicalCloudFacts{Name: "lc"}))))
	require.Equal(t, "facts.name", errs.FieldOf(statusOf(t, f.Put(ctx, &typesv1.LogicalCloudFacts{Project: "p"}))))
}

func statusOf(t *testing.T, err error) *status.Status {
	t.Helper()
	require.Equal(t, codes.InvalidArgument, errs.Code(err))
	st, ok := status.FromError(err)
	require.True(t, ok)
	return st
}
