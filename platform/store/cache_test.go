package store_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// The collections these tests keep reads of in memory.
const (
	cachedColl  = "cached_things"
	cachedMarks = "cached_things_marks"
)

func init() { store.CacheReads(cachedColl, cachedMarks) }

func cachedThings(s *store.Store) *store.Records[*typesv1.Metadata] {
	return store.NewRecords(s, cachedColl, "thing", func() *typesv1.Metadata { return &typesv1.Metadata{} })
}

// otherProcess is a second client of s's database, with a connection of
// its own: another replica as far as the store can tell.
func otherProcess(t *testing.T, s *store.Store) *store.Store {
	t.Helper()
	o, err := store.Open(store.Config{URI: s.ClientURI(), Database: s.Database().Name(), Keyring: storetest.Keyring(t)}, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { o.Close(context.Background()) })
	return o
}

func thing(name, desc string) *typesv1.Metadata {
	return &typesv1.Metadata{Name: name, Description: desc}
}

// descriptions is what a read shows: name=description, ordered.
func descriptions(ms []*typesv1.Metadata) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.GetName()+"="+m.GetDescription())
	}
	return out
}

// TestCachedReadsFollowOtherProcessesWrites writes through one process
// and reads through another, whose reads are kept in memory: after every
// kind of write, each read (ListPage, List, ListUnder, Get) shows it at
// once; with no write between two reads, the second reads only the
// group's change mark.
func TestCachedReadsFollowOtherProcessesWrites(t *testing.T) {
	ctx := context.Background()
	s := storetest.Open(t)
	reader, writer := cachedThings(s), cachedThings(otherProcess(t, s))

	want := map[string]string{}   // live id under p/x → description
	marked := map[string]string{} // id under p/x marked for deletion → description
	check := func(step string) {
		t.Helper()
		var ids []string
		for id := range want {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		var exp []string
		for _, id := range ids {
			exp = append(exp, id[len("p/x/"):]+"="+want[id])
		}
		for range 2 { // the second from memory
			page, _, err := reader.ListPage(ctx, "p/x", store.PageRequest{Size: 100})
			require.NoError(t, err, step)
			require.Equal(t, exp, nilIfEmpty(descriptions(page)), step+": ListPage")
			all, err := reader.List(ctx, "p/x")
			require.NoError(t, err, step)
			require.Equal(t, exp, nilIfEmpty(descriptions(all)), step+": List")
			under, err := reader.ListUnder(ctx, []string{"p/x", "p/y"})
			require.NoError(t, err, step)
			require.Equal(t, exp, nilIfEmpty(descriptions(under["p/x"])), step+": ListUnder")
			// Reads across groups.
			var allExp, markedExp []string
			for id, d := range marked {
				markedExp = append(markedExp, id[len("p/x/"):]+"="+d+" (deleting)")
			}
			allExp = append(slices.Clone(exp), markedExp...)
			slices.Sort(allExp)
			for name, read := range map[string]func() ([]store.Item[*typesv1.Metadata], error){
				"Match":    func() ([]store.Item[*typesv1.Metadata], error) { return reader.Match(ctx, nil) },
				"All":      func() ([]store.Item[*typesv1.Metadata], error) { return reader.All(ctx) },
				"Children": func() ([]store.Item[*typesv1.Metadata], error) { return reader.Children(ctx, "p/x") },
			} {
				items, err := read()
				require.NoError(t, err, step)
				require.Equal(t, allExp, nilIfEmpty(itemsUnder(items, "p/x")), step+": "+name)
			}
			deleting, err := reader.Deleting(ctx)
			require.NoError(t, err, step)
			require.ElementsMatch(t, markedExp, itemsUnder(deleting, "p/x"), step+": Deleting")
			scan, _, err := reader.ScanPage(ctx, store.PageRequest{Size: 1000})
			require.NoError(t, err, step)
			require.Equal(t, exp, nilIfEmpty(descriptions(scan)), step+": ScanPage")
			many, err := reader.GetMany(ctx, []string{"p/x/a", "p/x/b", "p/x/c"})
			require.NoError(t, err, step)
			require.Len(t, many, len(want), step+": GetMany")
			for id, m := range many {
				require.Equal(t, want[id], m.GetDescription(), step+": GetMany")
			}
			got, err := reader.Get(ctx, "p/x/a")
			if d, ok := want["p/x/a"]; ok {
				require.NoError(t, err, step)
				require.Equal(t, d, got.Msg.GetDescription(), step+": Get")
			} else {
				require.Equal(t, codes.NotFound, errs.Code(err), "%s: Get: %v", step, err)
			}
		}
	}
	check("empty")
	require.NoError(t, writer.Create(ctx, "p/x/a", "p/x", thing("a", "1")))
	want["p/x/a"] = "1"
	check("create")
	require.NoError(t, writer.Create(ctx, "p/x/b", "p/x", thing("b", "1")))
	want["p/x/b"] = "1"
	check("second create")
	_, err := writer.Modify(ctx, "p/x/a", func(m *typesv1.Metadata) error { m.Description = "2"; return nil })
	require.NoError(t, err)
	want["p/x/a"] = "2"
	check("modify")
	cur, err := writer.Get(ctx, "p/x/b")
	require.NoError(t, err)
	require.NoError(t, writer.Update(ctx, "p/x/b", cur.Version, thing("b", "3")))
	want["p/x/b"] = "3"
	check("update")
	_, err = writer.MarkDeleting(ctx, "p/x/a")
	require.NoError(t, err)
	delete(want, "p/x/a")
	marked["p/x/a"] = "2"
	check("mark deleting")
	require.NoError(t, writer.Unmark(ctx, "p/x/a"))
	want["p/x/a"] = "2"
	delete(marked, "p/x/a")
	check("unmark")
	require.NoError(t, writer.Delete(ctx, "p/x/a"))
	delete(want, "p/x/a")
	check("delete")
	require.NoError(t, writer.Put(ctx, "p/x/a", "p/x", thing("a", "4")))
	want["p/x/a"] = "4"
	check("put")
	cur, err = writer.Get(ctx, "p/x/a")
	require.NoError(t, err)
	require.NoError(t, writer.DeleteVersion(ctx, "p/x/a", cur.Version))
	delete(want, "p/x/a")
	check("delete version")
	refused := errs.Invalid("x", "refused")
	require.Error(t, writer.CreateChecked(ctx, "p/x/a", "p/x", thing("a", "5"), func(context.Context) error { return refused }))
	check("refused checked create")
	n, err := writer.DeleteUnder(ctx, "p/x")
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	delete(want, "p/x/b")
	check("delete under")

	// Unchanged: one keyed read of the mark, none of the records.
	require.NoError(t, writer.Create(ctx, "p/x/c", "p/x", thing("c", "1")))
	want["p/x/c"] = "1"
	check("before counting")
	before := store.CommandsSent()
	_, _, err = reader.ListPage(ctx, "p/x", store.PageRequest{Size: 100})
	require.NoError(t, err)
	after := store.CommandsSent()
	require.EqualValues(t, 1, after["find "+cachedMarks]-before["find "+cachedMarks])
	require.EqualValues(t, 0, after["find "+cachedColl]-before["find "+cachedColl])

	// A read across groups: the marks, and nothing else, when unchanged.
	_, err = reader.Deleting(ctx)
	require.NoError(t, err)
	before = store.CommandsSent()
	_, err = reader.Deleting(ctx)
	require.NoError(t, err)
	after = store.CommandsSent()
	require.EqualValues(t, 1, after["find "+cachedMarks]-before["find "+cachedMarks])
	require.EqualValues(t, 0, after["find "+cachedColl]-before["find "+cachedColl])

	// Another group's writes leave this group's reads in memory, and
	// reads across groups show them.
	require.NoError(t, writer.Create(ctx, "q/x/a", "q/x", thing("a", "1")))
	before = store.CommandsSent()
	_, _, err = reader.ListPage(ctx, "p/x", store.PageRequest{Size: 100})
	require.NoError(t, err)
	after = store.CommandsSent()
	require.EqualValues(t, 0, after["find "+cachedColl]-before["find "+cachedColl])
	all, err := reader.Match(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"a=1"}, itemsUnder(all, "q/x"))
	_, err = writer.MarkDeleting(ctx, "q/x/a")
	require.NoError(t, err)
	deleting, err := reader.Deleting(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"a=1 (deleting)"}, itemsUnder(deleting, "q/x"))
}

// itemsUnder is what a read shows of the items under parent:
// name=description, and whether each is being deleted.
func itemsUnder(items []store.Item[*typesv1.Metadata], parent string) []string {
	var out []string
	for _, it := range items {
		if it.Parent != parent {
			continue
		}
		s := it.Msg.GetName() + "=" + it.Msg.GetDescription()
		if it.Deleting {
			s += " (deleting)"
		}
		out = append(out, s)
	}
	return out
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// TestCachedReadsAreCopies changes what reads returned: what is kept is
// not changed.
func TestCachedReadsAreCopies(t *testing.T) {
	ctx := context.Background()
	recs := cachedThings(storetest.Open(t))
	require.NoError(t, recs.Create(ctx, "p/a", "p", thing("a", "1")))
	for range 2 {
		page, _, err := recs.ListPage(ctx, "p", store.PageRequest{})
		require.NoError(t, err)
		require.Equal(t, []string{"a=1"}, descriptions(page))
		page[0].Description = "changed by the caller"
		got, err := recs.Get(ctx, "p/a")
		require.NoError(t, err)
		require.Equal(t, "1", got.Msg.GetDescription())
		got.Msg.Description = "changed by the caller"
		all, err := recs.ListUnder(ctx, []string{"p"})
		require.NoError(t, err)
		require.Equal(t, []string{"a=1"}, descriptions(all["p"]))
		all["p"][0].Description = "changed by the caller"
	}
}

// TestCachedReadsAgeOut writes a record behind the marks' back, as a
// writer that died between its write and its mark would leave it: reads
// kept in memory show the old record (they are kept), until cacheMaxAge.
func TestCachedReadsAgeOut(t *testing.T) {
	defer store.SetCacheMaxAge(time.Second)()
	ctx := context.Background()
	s := storetest.Open(t)
	recs := cachedThings(s)
	require.NoError(t, recs.Create(ctx, "p/a", "p", thing("a", "1")))
	page, _, err := recs.ListPage(ctx, "p", store.PageRequest{})
	require.NoError(t, err)
	require.Equal(t, []string{"a=1"}, descriptions(page))
	kept := time.Now()

	_, err = s.Database().Collection(cachedColl).UpdateOne(ctx, bson.D{{Key: "_id", Value: "p/a"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "body.description", Value: "2"}}}, {Key: "$inc", Value: bson.D{{Key: "version", Value: 1}}}})
	require.NoError(t, err)
	page, _, err = recs.ListPage(ctx, "p", store.PageRequest{})
	require.NoError(t, err)
	if time.Since(kept) < time.Second {
		require.Equal(t, []string{"a=1"}, descriptions(page), "the read kept in memory")
	}
	require.Eventually(t, func() bool {
		page, _, err := recs.ListPage(ctx, "p", store.PageRequest{})
		return err == nil && slices.Equal(descriptions(page), []string{"a=2"})
	}, 5*time.Second, 50*time.Millisecond)
}

// TestCachedReadsNeverBehindAReturnedWrite runs writers in processes of
// their own beside a reader whose reads are kept in memory: every read
// shows every write that returned before the read began.
func TestCachedReadsNeverBehindAReturnedWrite(t *testing.T) {
	ctx := context.Background()
	s := storetest.Open(t)
	reader := cachedThings(s)
	require.NoError(t, reader.Create(ctx, "p/shared", "p", thing("shared", "0")))

	const writers, each = 4, 15
	var mu sync.Mutex
	created := map[string]time.Time{} // id → when its Create returned
	counted := map[int]time.Time{}    // count → when the Modify that set it returned
	var wg sync.WaitGroup
	for w := range writers {
		recs := cachedThings(otherProcess(t, s))
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("p/w%d-%02d", w, i)
				if err := recs.Create(ctx, id, "p", thing(id, "")); err != nil {
					t.Errorf("create %s: %v", id, err)
					return
				}
				mu.Lock()
				created[id] = time.Now()
				mu.Unlock()
				for {
					var n int
					_, err := recs.Modify(ctx, "p/shared", func(m *typesv1.Metadata) error {
						_, err := fmt.Sscan(m.Description, &n)
						n++
						m.Description = fmt.Sprint(n)
						return err
					})
					if errs.Code(err) == codes.Aborted {
						continue
					}
					if err != nil {
						t.Errorf("modify: %v", err)
						return
					}
					mu.Lock()
					counted[n] = time.Now()
					mu.Unlock()
					break
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reads := 0
	for finished := false; !finished; reads++ {
		select {
		case <-done:
			finished = true // one more read after the last write
		default:
		}
		start := time.Now()
		page, _, err := reader.ListPage(ctx, "p", store.PageRequest{Size: 1000})
		require.NoError(t, err)
		shared, err := reader.Get(ctx, "p/shared")
		require.NoError(t, err)
		// A read across groups, kept under every group's marks.
		scanned, err := reader.Match(ctx, nil)
		require.NoError(t, err)
		seen, inScan := map[string]bool{}, map[string]bool{}
		for _, m := range page {
			seen[m.GetName()] = true
		}
		for _, it := range scanned {
			inScan[it.ID] = true
		}
		var n int
		_, err = fmt.Sscan(shared.Msg.GetDescription(), &n)
		require.NoError(t, err)
		mu.Lock()
		for id, at := range created {
			require.False(t, at.Before(start) && !seen[id], "read %d: %s was created before the read began and is not listed", reads, id)
			require.False(t, at.Before(start) && !inScan[id], "read %d: %s was created before the read began and is not matched", reads, id)
		}
		for c, at := range counted {
			require.False(t, at.Before(start) && n < c, "read %d: the count was %d before the read began, the read shows %d", reads, c, n)
		}
		mu.Unlock()
	}
	require.Len(t, created, writers*each)
	require.Len(t, counted, writers*each)
	t.Logf("%d reads beside %d writes", reads, 2*writers*each)
}

// TestCachedCollectionKeepsIdsInTheirGroup refuses a record whose id is
// not in its parent's group: the group's mark would not cover its list.
func TestCachedCollectionKeepsIdsInTheirGroup(t *testing.T) {
	ctx := context.Background()
	recs := cachedThings(storetest.Open(t))
	require.Equal(t, codes.Internal, errs.Code(recs.Create(ctx, "q/a", "p", thing("a", ""))))
	require.Equal(t, codes.Internal, errs.Code(recs.Put(ctx, "a", "", thing("a", ""))))
	require.NoError(t, recs.Create(ctx, "p/a", "p", thing("a", "")))
}
