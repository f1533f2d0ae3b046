package store_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

func newStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return s
}

func code(err error) codes.Code { return status.Code(err) }

func TestRecordsCRUD(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	recs := store.NewRecords(s, "things", "thing", func() *structpb.Struct { return &structpb.Struct{} })

	require.NoError(t, recs.Create(ctx, "p/a", "p", newStruct(t, map[string]any{"n": 1.0, "labels": []any{"edge"}})))
	require.NoError(t, recs.Create(ctx, "p/b", "p", newStruct(t, map[string]any{"n": 2.0})))
	require.NoError(t, recs.Create(ctx, "q/a", "q", newStruct(t, map[string]any{"n": 3.0})))

	err := recs.Create(ctx, "p/a", "p", newStruct(t, nil))
	require.Equal(t, codes.AlreadyExists, code(err), "duplicate id: %v", err)

	got, err := recs.Get(ctx, "p/a")
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Version)
	require.Equal(t, 1.0, got.Msg.AsMap()["n"])
	require.Equal(t, []any{"edge"}, got.Msg.AsMap()["labels"])

	list, err := recs.List(ctx, "p")
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, 2.0, list[1].AsMap()["n"], "ordered by id")

	_, err = recs.Get(ctx, "p/zz")
	require.Equal(t, codes.NotFound, code(err))

	require.NoError(t, recs.Update(ctx, "p/a", 1, newStruct(t, map[string]any{"n": 10.0})))
	err = recs.Update(ctx, "p/a", 1, newStruct(t, map[string]any{"n": 11.0}))
	require.Equal(t, codes.Aborted, code(err), "stale version must lose: %v", err)
	err = recs.Update(ctx, "p/zz", 1, newStruct(t, nil))
	require.Equal(t, codes.NotFound, code(err))

	got, err = recs.Get(ctx, "p/a")
	require.NoError(t, err)
	require.EqualValues(t, 2, got.Version)
	require.Equal(t, 10.0, got.Msg.AsMap()["n"])

	require.NoError(t, recs.Delete(ctx, "p/a"))
	require.Equal(t, codes.NotFound, code(recs.Delete(ctx, "p/a")))
	list, err = recs.List(ctx, "p")
	require.NoError(t, err)
	require.Len(t, list, 1)
}

// TestConcurrentConditionalUpdatesOneWinner is the guard against FerretDB's
// non-atomic updates: N writers race from the same version, each through its
// own client (so its own connections), and exactly one may win.
func TestConcurrentConditionalUpdatesOneWinner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	recs := store.NewRecords(s, "race", "race", func() *structpb.Struct { return &structpb.Struct{} })
	const writers = 16
	for round := range 5 {
		id := "r" + string(rune('a'+round))
		require.NoError(t, recs.Create(ctx, id, "", newStruct(t, map[string]any{"w": -1.0})))
		var wins, aborted atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := recs.Update(ctx, id, 1, newStruct(t, map[string]any{"w": float64(w)}))
				switch code(err) {
				case codes.OK:
					wins.Add(1)
				case codes.Aborted:
					aborted.Add(1)
				default:
					t.Errorf("writer %d: unexpected %v", w, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		require.EqualValues(t, 1, wins.Load(), "round %d: exactly one winner", round)
		require.EqualValues(t, writers-1, aborted.Load())
		got, err := recs.Get(ctx, id)
		require.NoError(t, err)
		require.EqualValues(t, 2, got.Version)
	}
}

// TestConcurrentIncrementsAcrossClients checks at the wire level, with a
// client (and connection pool) per writer, that no $inc is lost: each
// either lands or is refused as a write conflict (the store server's
// version guard, platform/store/storeserver), and a refused one is sent
// again. Like every DCM write, each $inc raises the document's version.
func TestConcurrentIncrementsAcrossClients(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	coll := s.Database().Collection("counters")
	_, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "c"}, {Key: "n", Value: 0}, {Key: "version", Value: int64(1)}})
	require.NoError(t, err)

	uri := s.ClientURI()
	const writers, each = 8, 20
	var wg sync.WaitGroup
	var refused atomic.Int32
	for range writers {
		c, err := mongo.Connect(options.Client().ApplyURI(uri))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
		cc := c.Database(s.Database().Name()).Collection("counters")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				for attempt := 0; ; attempt++ {
					_, err := cc.UpdateOne(ctx, bson.D{{Key: "_id", Value: "c"}},
						bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}, {Key: "version", Value: int64(1)}}}})
					if err == nil {
						break
					}
					if !store.IsWriteConflict(err) || attempt == 1000 {
						t.Errorf("inc: %v", err)
						return
					}
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	var doc struct {
		N       int   `bson:"n"`
		Version int64 `bson:"version"`
	}
	require.NoError(t, coll.FindOne(ctx, bson.D{{Key: "_id", Value: "c"}}).Decode(&doc))
	require.Equal(t, writers*each, doc.N, "%d increments were refused and sent again", refused.Load())
	require.EqualValues(t, 1+writers*each, doc.Version)
}

// TestStoreOutageIsUnavailable takes the embedded backend down: calls fail
// with Unavailable (not Internal), and succeed again once it is back, on the
// same client, with no restart of ours.
func TestStoreOutageIsUnavailable(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	if s.Embedded() == nil {
		t.Skip("outage is injected into the embedded store only")
	}
	ctx := context.Background()
	recs := store.NewRecords(s, "outage", "thing", func() *structpb.Struct { return &structpb.Struct{} })
	require.NoError(t, recs.Create(ctx, "a", "", newStruct(t, nil)))

	s.Embedded().StopBackend()
	_, err := recs.Get(ctx, "a")
	require.Equal(t, codes.Unavailable, code(err), "store down: %v", err)
	require.Equal(t, codes.Unavailable, code(recs.Create(ctx, "b", "", newStruct(t, nil))))

	require.NoError(t, s.Embedded().StartBackend())
	require.Eventually(t, func() bool {
		_, err := recs.Get(ctx, "a")
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "store back: reads work again")
	_, err = recs.Get(ctx, "b")
	require.Equal(t, codes.NotFound, code(err), "the write during the outage did not half-happen")
}

func TestDottedFieldNamesAreNotStored(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	if s.Embedded() == nil {
		t.Skip("real MongoDB accepts dotted field names; we never rely on either behaviour")
	}
	recs := store.NewRecords(s, "dotted", "thing", func() *structpb.Struct { return &structpb.Struct{} })
	err := recs.Create(context.Background(), "a", "", newStruct(t, map[string]any{"limits.cpu": "1"}))
	require.Error(t, err, "FerretDB rejects dotted keys: records keep Kubernetes-keyed maps as name/value lists")
}
