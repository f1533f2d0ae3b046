package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// TestMarkDeleting walks a record through a deletion that is refused and
// one that completes: marked records are hidden, cannot be updated or
// recreated, and are found again by the cleanup query.
func TestMarkDeleting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	recs := store.NewRecords(s, "things", "thing", func() *structpb.Struct { return &structpb.Struct{} })
	require.NoError(t, recs.Create(ctx, "p/a", "p", newStruct(t, map[string]any{"kind": "x"})))
	require.NoError(t, recs.Create(ctx, "p/b", "p", newStruct(t, map[string]any{"kind": "y"})))
	before, err := recs.Get(ctx, "p/a")
	require.NoError(t, err)

	_, err = recs.MarkDeleting(ctx, "p/a")
	require.NoError(t, err)
	_, err = recs.Get(ctx, "p/a")
	require.Equal(t, codes.NotFound, code(err), "a marked record is gone for readers")
	list, err := recs.List(ctx, "p")
	require.NoError(t, err)
	require.Len(t, list, 1)
	children, err := recs.Children(ctx, "p")
	require.NoError(t, err)
	require.Len(t, children, 2, "but not for the parent's own deletion check")
	require.True(t, children[0].Deleting)
	err = recs.Update(ctx, "p/a", before.Version, newStruct(t, nil))
	require.Equal(t, codes.NotFound, code(err), "an update read before the mark loses: %v", err)
	err = recs.Create(ctx, "p/a", "p", newStruct(t, nil))
	require.Equal(t, codes.FailedPrecondition, code(err), "recreating during deletion: %v", err)
	_, err = recs.MarkDeleting(ctx, "p/a")
	require.Equal(t, codes.NotFound, code(err), "marked twice")
	pending, err := recs.Deleting(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, "p/a", pending[0].ID)
	require.Equal(t, "p", pending[0].Parent)

	require.NoError(t, recs.Unmark(ctx, "p/a"))
	got, err := recs.Get(ctx, "p/a")
	require.NoError(t, err, "unmarked: live again")
	require.Greater(t, got.Version, before.Version)

	matched, err := recs.Match(ctx, map[string]string{"kind": "y"})
	require.NoError(t, err)
	require.Len(t, matched, 1)
	require.Equal(t, "p/b", matched[0].ID)

	n, err := recs.DeleteUnder(ctx, "p")
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	n, err = recs.DeleteUnder(ctx, "p")
	require.NoError(t, err)
	require.Zero(t, n, "a rerun cascade removes nothing and does not fail")
}

func TestCreateChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	recs := store.NewRecords(s, "things", "thing", func() *structpb.Struct { return &structpb.Struct{} })

	var sawInserted bool
	require.NoError(t, recs.CreateChecked(ctx, "p/a", "p", newStruct(t, nil), func(ctx context.Context) error {
		_, err := recs.Get(ctx, "p/a")
		sawInserted = err == nil
		return nil
	}))
	require.True(t, sawInserted, "the check runs after the insert")

	gone := errs.NotFound("parent gone")
	err := recs.CreateChecked(ctx, "p/b", "p", newStruct(t, nil), func(context.Context) error { return gone })
	require.True(t, errors.Is(err, gone), "the check's error is returned: %v", err)
	_, err = recs.Get(ctx, "p/b")
	require.Equal(t, codes.NotFound, code(err), "a failed check leaves nothing behind")

	err = recs.CreateChecked(ctx, "p/a", "p", newStruct(t, nil), func(context.Context) error {
		t.Error("check must not run when the insert fails")
		return nil
	})
	require.Equal(t, codes.AlreadyExists, code(err))
}
