package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"google.golang.org/protobuf/proto"
)

// Reads kept in memory (docs/store.md, "Reads kept in memory").
//
// A collection declared with CacheReads has its reads by parent (ListPage,
// List, ListUnder) and by id (Get) answered from memory while nothing in
// their group changed: a group is the first name of a key (Key), e.g. a
// project for its logical clouds and their permissions. Every write of
// such a collection, by any Records of it in any process, is followed by
// a write of its group's change mark (a random value, one small document
// per group in a collection of its own); every cached read first reads
// the mark by _id, one keyed command, and uses what it kept only if it
// was read at the same mark. The embedded store decodes every document of
// a collection for a list (it pushes only {_id: <string>} down to
// SQLite), so a list kept in memory costs one keyed read where it cost a
// scan.
//
// Why it is never behind a write that has returned: a writer changes the
// mark after its write, a reader reads the mark before the records, so a
// write the reader's records missed lands its mark after the reader read
// the mark, and the next read sees another mark. Marks are random, never
// counted: FerretDB's updates are not atomic under concurrency, and a
// lost or reordered counter increment could bring a mark back to a value
// a reader kept; a random value comes back never. A write whose mark
// could not be written (the store failed between the two commands, the
// writer died) returns an error and drops this process's entries of the
// group; another process may then answer from memory for at most
// cacheMaxAge, after which every entry is read again.

// cacheMaxAge bounds how long an entry is used, whatever the mark says:
// the staleness of another process after a write whose mark was never
// written. A variable for tests.
var cacheMaxAge = 10 * time.Second

// cacheMaxMessages bounds the messages a collection keeps in memory per
// process; the oldest entries go first.
const cacheMaxMessages = 20000

// cached is the registry of CacheReads: collection → its marks'
// collection. Filled from the services' init functions, before any
// Records is opened.
var cached sync.Map

// CacheReads declares that reads of collection are kept in memory, with
// the change marks of its groups in collection marks (which the
// service's database user needs, like its records). Call it from the
// init function of the package that declares the collection: every
// Records of collection opened afterwards, in every process, writes the
// marks, and one that did not would leave other processes' reads behind.
func CacheReads(collection, marks string) {
	cached.Store(collection, marks)
}

// cacheReads is the metric of the reads CacheReads kept: hits, misses.
var cacheReads = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "dcm_store_cached_reads_total",
	Help: "Reads of collections kept in memory (store.CacheReads), by collection and result (hit: answered from memory after reading the group's change mark; miss: read from the store).",
}, []string{"collection", "result"})

// readCache is one collection's reads kept in memory in one process,
// shared by every Records of the collection opened on the same store.
type readCache struct {
	collection string
	marks      *mongo.Collection

	// loads are the reads from the store under way, by key and mark:
	// readers that miss together wait for one read.
	loads singleflight.Group

	mu      sync.Mutex
	entries map[string]*cacheEntry
	held    int // messages held by entries
}

// cacheEntry is one read's answer, what the store held at mark.
type cacheEntry struct {
	group string
	mark  string
	at    time.Time // when mark was read
	value any
	size  int // messages in value
}

// cacheOf is the read cache of collection name on store s (a root),
// nil if the collection is not declared with CacheReads.
func (s *Store) cacheOf(name string) *readCache {
	m, ok := cached.Load(name)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.caches == nil {
		s.caches = map[string]*readCache{}
	}
	c := s.caches[name]
	if c == nil {
		c = &readCache{collection: name, marks: s.db.Collection(m.(string)), entries: map[string]*cacheEntry{}}
		s.caches[name] = c
	}
	return c
}

// groupOf is the group of a key: its first name.
func groupOf(key string) string {
	g, _, _ := strings.Cut(key, "/")
	return g
}

// everyGroup is the group of a read across the whole collection (Match,
// Deleting, All, ScanPage): its mark is every group's (allMarks), and a
// write of any group drops its entries.
const everyGroup = "\x00every"

// mark reads group's change mark ("" before its first write).
func (c *readCache) mark(ctx context.Context, group string) (string, error) {
	if group == everyGroup {
		return c.allMarks(ctx)
	}
	var doc struct {
		Mark string `bson:"mark"`
	}
	err := c.marks.FindOne(ctx, bson.D{{Key: "_id", Value: group}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return "", nil
	}
	if err != nil {
		return "", mapErr("read the change mark of "+c.collection, err)
	}
	return doc.Mark, nil
}

// allMarks reads every group's change mark, one command (a document per
// project, small): a digest of them all. A write of any group changes it,
// and a write that a read across groups missed landed its group's mark
// after that group's mark was read, so the next digest differs.
func (c *readCache) allMarks(ctx context.Context) (string, error) {
	cur, err := c.marks.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return "", mapErr("read the change marks of "+c.collection, err)
	}
	var docs []struct {
		ID   string `bson:"_id"`
		Mark string `bson:"mark"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return "", mapErr("read the change marks of "+c.collection, err)
	}
	h := sha256.New()
	for _, d := range docs {
		h.Write([]byte(d.ID))
		h.Write([]byte{0})
		h.Write([]byte(d.Mark))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// changed writes a new change mark for the group of key after a write of
// it, and drops this process's entries of the group. Called even when the
// write failed in a way that may have written (a timeout): only a write
// known not to have changed anything may skip it.
func (c *readCache) changed(ctx context.Context, key string) error {
	if c == nil {
		return nil
	}
	group := groupOf(key)
	defer c.drop(group)
	var b [16]byte
	_, _ = rand.Read(b[:])
	// Written even if the caller has gone away: the write it follows may
	// have landed.
	_, err := c.marks.UpdateOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: group}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "mark", Value: hex.EncodeToString(b[:])}}}}, options.UpdateOne().SetUpsert(true))
	return mapErr("write the change mark of "+c.collection+" (the write before it may have landed)", err)
}

func (c *readCache) drop(group string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if e.group == group || e.group == everyGroup {
			c.held -= e.size
			delete(c.entries, k)
		}
	}
}

// lookup is the entry of key if it was read at mark and is young enough.
func (c *readCache) lookup(key, mark string, now time.Time) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || e.mark != mark || now.Sub(e.at) >= cacheMaxAge {
		return nil, false
	}
	return e.value, true
}

// keep stores an entry, dropping the oldest ones beyond cacheMaxMessages.
func (c *readCache) keep(key string, e *cacheEntry) {
	if e.size > cacheMaxMessages {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[key]; ok {
		c.held -= old.size
	}
	c.entries[key] = e
	c.held += e.size
	for c.held > cacheMaxMessages {
		var oldest string
		for k, o := range c.entries {
			if oldest == "" || o.at.Before(c.entries[oldest].at) {
				oldest = k
			}
		}
		c.held -= c.entries[oldest].size
		delete(c.entries, oldest)
	}
}

// cachedRead answers load's read, key in c, from memory when group's mark
// is the one it was kept at; the caller gets copies (clone), never what is
// kept. Readers that miss at the same mark share one load, which runs
// without the first one's cancellation. Without a cache it is load.
func cachedRead[T any](ctx context.Context, c *readCache, group, key string, load func(context.Context) (T, int, error), clone func(T) T) (T, error) {
	if c == nil {
		v, _, err := load(ctx)
		return v, err
	}
	var zero T
	at := time.Now()
	mark, err := c.mark(ctx, group)
	if err != nil {
		return zero, err
	}
	if v, ok := c.lookup(key, mark, time.Now()); ok {
		cacheReads.WithLabelValues(c.collection, "hit").Inc()
		return clone(v.(T)), nil
	}
	cacheReads.WithLabelValues(c.collection, "miss").Inc()
	v, err, _ := c.loads.Do(key+"\x00"+mark, func() (any, error) {
		v, size, err := load(context.WithoutCancel(ctx))
		if err != nil {
			return nil, err
		}
		c.keep(key, &cacheEntry{group: group, mark: mark, at: at, value: v, size: size})
		return v, nil
	})
	if err != nil {
		return zero, err
	}
	return clone(v.(T)), nil
}

// cloneAll copies messages.
func cloneAll[M proto.Message](ms []M) []M {
	out := make([]M, len(ms))
	for i, m := range ms {
		out[i] = proto.Clone(m).(M)
	}
	return out
}
