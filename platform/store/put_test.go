package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// TestPut: Put creates a record that is missing and replaces one that is
// there, bumping its version, under its parent.
func TestPut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	recs := store.NewRecords(s, "put", "thing", func() *structpb.Struct { return &structpb.Struct{} })
	require.NoError(t, recs.Put(ctx, "p/a", "p", newStruct(t, map[string]any{"n": 1})))
	got, err := recs.Get(ctx, "p/a")
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Msg.GetFields()["n"].GetNumberValue())
	require.EqualValues(t, 1, got.Version)
	require.NoError(t, recs.Put(ctx, "p/a", "p", newStruct(t, map[string]any{"n": 2})))
	got, err = recs.Get(ctx, "p/a")
	require.NoError(t, err)
	require.EqualValues(t, 2, got.Msg.GetFields()["n"].GetNumberValue())
	require.EqualValues(t, 2, got.Version)
	under, err := recs.List(ctx, "p")
	require.NoError(t, err)
	require.Len(t, under, 1)
	require.NoError(t, recs.Update(ctx, "p/a", 2, newStruct(t, map[string]any{"n": 3})), "Update sees Put's version")
}
