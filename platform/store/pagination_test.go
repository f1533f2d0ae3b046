package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// TestListPageConcurrent pages through 250 records in pages of 100 while
// other writers create and delete records under the same parent: every
// record that exists from the first page to the last is listed exactly
// once, nothing is listed twice, and nothing of another parent shows.
func TestListPageConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	recs := store.NewRecords(s, "paged", "thing", func() *structpb.Struct { return &structpb.Struct{} })
	stable := map[string]bool{}
	for i := range 250 {
		id := fmt.Sprintf("p/item-%04d", i*2)
		require.NoError(t, recs.Create(ctx, id, "p", newStruct(t, map[string]any{"id": id})))
		stable[id] = true
	}
	// Doomed records are deleted while the pages are read; others of
	// another parent sort between p's and must never show.
	for i := range 50 {
		id := fmt.Sprintf("p/item-%04d-doomed", i*10)
		require.NoError(t, recs.Create(ctx, id, "p", newStruct(t, map[string]any{"id": id})))
		require.NoError(t, recs.Create(ctx, fmt.Sprintf("p/item-%04d-other", i*10), "q", newStruct(t, map[string]any{"id": "other"})))
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // churn: new records between the stable ones, doomed ones go
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = recs.Create(ctx, fmt.Sprintf("p/item-%04d", (i*7%250)*2+1), "p", newStruct(t, map[string]any{"id": "new"}))
			_ = recs.Delete(ctx, fmt.Sprintf("p/item-%04d-doomed", (i%50)*10))
		}
	}()

	seen := map[string]int{}
	page := store.PageRequest{Size: 100}
	pages := 0
	for {
		items, next, err := recs.ListPage(ctx, "p", page)
		require.NoError(t, err)
		require.LessOrEqual(t, len(items), 100)
		for _, it := range items {
			id := it.GetFields()["id"].GetStringValue()
			require.NotEqual(t, "other", id, "a record of another parent was listed")
			if id != "new" {
				seen[id]++
			}
		}
		pages++
		if next == "" {
			break
		}
		require.Less(t, pages, 20, "paging does not end")
		page.Token = next
	}
	close(stop)
	wg.Wait()

	for id := range stable {
		require.Equal(t, 1, seen[id], "record %s, present throughout, listed %d times", id, seen[id])
	}
	for id, n := range seen {
		require.Equal(t, 1, n, "record %s listed %d times", id, n)
	}
	require.GreaterOrEqual(t, pages, 3)
}

// TestListPageTokens checks sizes and tokens: the default size, a page
// token refused on another parent or filter and a malformed one, all
// InvalidArgument naming page-token; a negative size names page-size.
func TestListPageTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	recs := store.NewRecords(s, "paged", "thing", func() *structpb.Struct { return &structpb.Struct{} })
	for i := range 120 {
		labels := []any{"all"}
		if i%3 == 0 {
			labels = append(labels, "edge")
		}
		require.NoError(t, recs.Create(ctx, fmt.Sprintf("p/%03d", i), "p", newStruct(t, map[string]any{"labels": labels})))
	}
	require.NoError(t, recs.Create(ctx, "q/000", "q", newStruct(t, nil)))

	first, next, err := recs.ListPage(ctx, "p", store.PageRequest{})
	require.NoError(t, err)
	require.Len(t, first, store.DefaultPageSize, "no size: the default")
	require.NotEmpty(t, next)
	rest, last, err := recs.ListPage(ctx, "p", store.PageRequest{Size: 5000, Token: next})
	require.NoError(t, err, "a size over the maximum is clamped, not refused")
	require.Len(t, rest, 20)
	require.Empty(t, last, "the last page has no next token")

	all, _, err := recs.ListPage(ctx, "p", store.PageRequest{Size: store.MaxPageSize + 1})
	require.NoError(t, err)
	require.Len(t, all, 120)

	edge, next, err := recs.ListPage(ctx, "p", store.PageRequest{Size: 30, Match: map[string]string{"labels": "edge"}})
	require.NoError(t, err)
	require.Len(t, edge, 30, "a repeated field matches on one element")
	edge2, none, err := recs.ListPage(ctx, "p", store.PageRequest{Size: 30, Token: next, Match: map[string]string{"labels": "edge"}})
	require.NoError(t, err)
	require.Len(t, edge2, 10)
	require.Empty(t, none)

	for name, page := range map[string]store.PageRequest{
		"other filter": {Token: next},
		"malformed":    {Token: "not a token!"},
		"not base64":   {Token: "%%%"},
		"empty id":     {Token: "AQ"},
	} {
		_, _, err := recs.ListPage(ctx, "p", page)
		require.Equal(t, codes.InvalidArgument, errs.Code(err), "%s: %v", name, err)
		require.Equal(t, "page-token", errs.FieldOf(errs.ToStatus(err)), name)
	}
	_, pNext, err := recs.ListPage(ctx, "p", store.PageRequest{Size: 1})
	require.NoError(t, err)
	_, _, err = recs.ListPage(ctx, "q", store.PageRequest{Token: pNext})
	require.Equal(t, codes.InvalidArgument, errs.Code(err), "a token of another parent: %v", err)
	require.Equal(t, "page-token", errs.FieldOf(errs.ToStatus(err)))

	_, _, err = recs.ListPage(ctx, "p", store.PageRequest{Size: -1})
	require.Equal(t, codes.InvalidArgument, errs.Code(err))
	require.Equal(t, "page-size", errs.FieldOf(errs.ToStatus(err)))
}

// TestListUnder reads the live children of several parents at once: each
// parent's in id order, none of a parent not asked for, none marked for
// deletion, an empty list for a parent with none.
func TestListUnder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	recs := store.NewRecords(s, "under", "thing", func() *structpb.Struct { return &structpb.Struct{} })
	for _, parent := range []string{"a", "b", "c"} {
		for _, i := range []int{2, 0, 1} {
			id := fmt.Sprintf("%s/%d", parent, i)
			require.NoError(t, recs.Create(ctx, id, parent, newStruct(t, map[string]any{"id": id})))
		}
	}
	_, err := recs.MarkDeleting(ctx, "b/1")
	require.NoError(t, err)
	got, err := recs.ListUnder(ctx, []string{"a", "b", "empty"})
	require.NoError(t, err)
	ids := map[string][]string{}
	for parent, ms := range got {
		for _, m := range ms {
			ids[parent] = append(ids[parent], m.GetFields()["id"].GetStringValue())
		}
	}
	require.Equal(t, map[string][]string{"a": {"a/0", "a/1", "a/2"}, "b": {"b/0", "b/2"}}, ids)
	none, err := recs.ListUnder(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = recs.ListUnder(ctx, make([]string, store.MaxPageSize+1))
	require.Error(t, err)
}
