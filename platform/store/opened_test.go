package store_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// TestOpenedByService: every way of opening a collection (records, leases,
// stamps) is recorded under the service of the view it was opened on, once
// per name, sorted; the store's own opens are under "". docs/store.md's
// roles are checked against this (services/allinone/cmd/storedoc).
func TestOpenedByService(t *testing.T) {
	t.Parallel()
	root := storetest.Open(t)
	a, err := root.For("a")
	require.NoError(t, err)
	b, err := root.For("b")
	require.NoError(t, err)
	newStruct := func() *structpb.Struct { return &structpb.Struct{} }
	store.NewRecords(a, "a_records", "record", newStruct)
	store.NewRecords(a, "a_records", "record", newStruct)
	store.NewLeases(a, "a_leases")
	store.NewStamps(b, "b_stamps")
	store.NewRecords(root, "root_records", "record", newStruct)
	require.Equal(t, map[string][]string{
		"a": {"a_leases", "a_records"},
		"b": {"b_stamps"},
		"":  {"root_records"},
	}, b.Opened())
}
