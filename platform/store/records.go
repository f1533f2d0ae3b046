package store

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/dcm-project/dcm/platform/errs"
)

// record is the stored shape of an API object: its key, the key of the record
// it belongs to, a version bumped by every write, the object itself, and
// whether it is being deleted (see MarkDeleting).
type record struct {
	ID       string        `bson:"_id"`
	Parent   string        `bson:"parent"`
	Version  int64         `bson:"version"`
	Body     bson.Raw      `bson:"body"`
	Secrets  []sealedField `bson:"secrets,omitempty"`
	Deleting bool          `bson:"deleting,omitempty"`
}

// live matches records not marked for deletion.
var live = bson.E{Key: "deleting", Value: bson.D{{Key: "$ne", Value: true}}}

// Records is a collection of API objects of one kind (a protobuf message
// type), keyed by a string id and grouped by parent id.
type Records[M proto.Message] struct {
	coll   *mongo.Collection
	kind   string
	newMsg func() M
	store  *Store
	// cache keeps reads in memory if the collection is declared with
	// CacheReads (cache.go); nil otherwise.
	cache *readCache
}

// NewRecords opens collection name for objects that errors call kind.
func NewRecords[M proto.Message](s *Store, name, kind string, newMsg func() M) *Records[M] {
	s.own(name)
	s.open(name)
	if marks, ok := cached.Load(name); ok {
		s.open(marks.(string))
	}
	return &Records[M]{coll: s.db.Collection(name), kind: kind, newMsg: newMsg, store: s, cache: s.base().cacheOf(name)}
}

// Versioned is an object with the version it was read at.
type Versioned[M proto.Message] struct {
	Msg     M
	Version int64
}

// Create stores msg under id; AlreadyExists if id is taken. Secrets, if
// any, are sealed and stored apart from msg (see Secret).
func (r *Records[M]) Create(ctx context.Context, id, parent string, msg M, secrets ...Secret) error {
	if err := grouped(r, id, parent); err != nil {
		return err
	}
	body, err := toBSON(msg)
	if err != nil {
		return err
	}
	sealed, err := r.store.seal(r.coll.Name(), id, nil, secrets)
	if err != nil {
		return err
	}
	_, err = r.coll.InsertOne(ctx, record{ID: id, Parent: parent, Version: 1, Body: body, Secrets: sealed})
	if err != nil && !mongo.IsDuplicateKeyError(err) {
		return wrote(ctx, r.cache, id, mapErr("insert "+r.kind, err))
	}
	if mongo.IsDuplicateKeyError(err) {
		var cur record
		if r.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&cur) == nil && cur.Deleting {
			return errs.Because(errs.ReasonStillDeleting, "%s %q is still being deleted; retry shortly", r.kind, id)
		}
		return errs.AlreadyExists("%s %q already exists", r.kind, id)
	}
	return wrote(ctx, r.cache, id, nil)
}

// wrote follows a write of key in c's collection that may have changed
// it, whose error is err: the group's change mark is written (cache.go) and the write's error,
// or else the mark's, returned.
func wrote(ctx context.Context, c *readCache, key string, err error) error {
	if merr := c.changed(ctx, key); err == nil {
		return merr
	}
	return err
}

// grouped refuses, in a collection whose reads are kept in memory, a
// record whose id is not in its parent's group (cache.go: a group's mark
// covers the lists under the parents of that group).
func grouped[M proto.Message](r *Records[M], id, parent string) error {
	if r.cache != nil && (groupOf(parent) == "" || groupOf(id) != groupOf(parent)) {
		return errs.Internal(fmt.Errorf("%s %q under %q: a collection whose reads are kept in memory needs ids that start with their parent's first name", r.kind, id, parent), "store error")
	}
	return nil
}

// CreateChecked stores msg like Create, then runs check (that the record's
// parent, in this or another service, still exists). If check fails, the
// record is removed again and check's error returned. Paired with a parent
// deletion that marks the parent (MarkDeleting) before it removes the
// children, no child can outlive its parent: either check sees the mark, or
// the removal sees the child. A check that passes is the caller's to keep.
func (r *Records[M]) CreateChecked(ctx context.Context, id, parent string, msg M, check func(context.Context) error, secrets ...Secret) error {
	if err := r.Create(ctx, id, parent, msg, secrets...); err != nil {
		return err
	}
	err := check(ctx)
	if err == nil {
		return nil
	}
	// The removal must happen even if the caller has gone away.
	if derr := r.Delete(context.WithoutCancel(ctx), id); derr != nil && errs.Code(derr) != codes.NotFound {
		return errors.Join(err, derr)
	}
	return err
}

// Get reads one object; NotFound if missing or marked for deletion. The
// filter is the id alone and the mark is checked here: the embedded store
// (FerretDB on SQLite) reads by primary key only for a filter that is
// exactly {_id: <string>}, and scans the whole collection for any other.
func (r *Records[M]) Get(ctx context.Context, id string) (Versioned[M], error) {
	return cachedRead(ctx, r.cache, groupOf(id), "g\x00"+id, func(ctx context.Context) (Versioned[M], int, error) {
		v, err := getRecord(ctx, r, id)
		return v, 1, err
	}, func(v Versioned[M]) Versioned[M] {
		return Versioned[M]{Msg: proto.Clone(v.Msg).(M), Version: v.Version}
	})
}

// getRecord is r's Get from the store.
func getRecord[M proto.Message](ctx context.Context, r *Records[M], id string) (Versioned[M], error) {
	var rec record
	err := r.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&rec)
	if errors.Is(err, mongo.ErrNoDocuments) || (err == nil && rec.Deleting) {
		return Versioned[M]{}, errs.NotFound("%s %q not found", r.kind, id)
	}
	if err != nil {
		return Versioned[M]{}, mapErr("get "+r.kind, err)
	}
	return r.decode(rec)
}

// GetMany reads the live objects of ids, by id (those missing or marked
// for deletion are not in the answer): one store command, where Get is
// one per id. At most MaxPageSize ids.
func (r *Records[M]) GetMany(ctx context.Context, ids []string) (map[string]M, error) {
	if len(ids) > MaxPageSize {
		return nil, fmt.Errorf("get %d %s records: at most %d at once", len(ids), r.kind, MaxPageSize)
	}
	out := make(map[string]M, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	items, err := r.find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, live})
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		out[it.ID] = it.Msg
	}
	return out, nil
}

// List reads every object under parent, ordered by id, but those marked
// for deletion: for internal callers that need them all. A public list
// answers ListPage.
func (r *Records[M]) List(ctx context.Context, parent string) ([]M, error) {
	return cachedRead(ctx, cacheUnder(r.cache, parent), groupOf(parent), "l\x00"+parent, func(ctx context.Context) ([]M, int, error) {
		items, err := findSorted(ctx, r, bson.D{{Key: "parent", Value: parent}, live})
		if err != nil {
			return nil, 0, err
		}
		out := make([]M, 0, len(items))
		for _, it := range items {
			out = append(out, it.Msg)
		}
		return out, len(out), nil
	}, cloneAll[M])
}

// cacheUnder is c for reads under parents, nil when there is
// none or they are not of one group (cache.go).
func cacheUnder(c *readCache, parents ...string) *readCache {
	if c == nil || len(parents) == 0 {
		return nil
	}
	g := groupOf(parents[0])
	for _, p := range parents {
		if g == "" || groupOf(p) != g {
			return nil
		}
	}
	return c
}

// ListUnder reads every live object under each of parents in one store
// command, by parent, each parent's ordered by id: a page of parents'
// children without one command per parent. At most MaxPageSize parents.
func (r *Records[M]) ListUnder(ctx context.Context, parents []string) (map[string][]M, error) {
	if len(parents) > MaxPageSize {
		return nil, fmt.Errorf("list %s under %d parents: at most %d at once", r.kind, len(parents), MaxPageSize)
	}
	if len(parents) == 0 {
		return map[string][]M{}, nil
	}
	return cachedRead(ctx, cacheUnder(r.cache, parents...), groupOf(parents[0]), "u\x00"+strings.Join(parents, "\x00"), func(ctx context.Context) (map[string][]M, int, error) {
		items, err := findSorted(ctx, r, bson.D{{Key: "parent", Value: bson.D{{Key: "$in", Value: parents}}}, live})
		if err != nil {
			return nil, 0, err
		}
		out := make(map[string][]M, len(parents))
		for _, it := range items {
			out[it.Parent] = append(out[it.Parent], it.Msg)
		}
		return out, len(items), nil
	}, func(in map[string][]M) map[string][]M {
		out := make(map[string][]M, len(in))
		for p, ms := range in {
			out[p] = cloneAll(ms)
		}
		return out
	})
}

// Pages of a list (docs/conventions.md "Lists"): ordered by id, each page
// starts after the last id of the one before, so items that exist from
// the first page to the last are listed once each, whatever is created or
// deleted meanwhile.
const (
	// DefaultPageSize is the size of a page whose request names none.
	DefaultPageSize = 100
	// MaxPageSize is the largest page: a larger size is clamped to it.
	MaxPageSize = 1000
)

// PageRequest asks for one page of a list: at most Size items (0: the
// default; above MaxPageSize: MaxPageSize), after the page whose next
// token Token is ("": from the first item). Match keeps the objects whose
// fields (protobuf field names, nested with ".") equal the given values; a
// repeated field matches when one of its elements does.
type PageRequest struct {
	Size  int32
	Token string
	Match map[string]string
}

// Paged is a List request: its page_size and page_token fields.
type Paged interface {
	GetPageSize() int32
	GetPageToken() string
}

// PageOf is the page a List request asks for.
func PageOf(req Paged) PageRequest {
	return PageRequest{Size: req.GetPageSize(), Token: req.GetPageToken()}
}

// pageField is the REST name of the token in errors.
const pageField = "page-token"

// ListPage reads one page of the live objects under parent, ordered by id,
// and the token of the next page ("" on the last). The token is bound to
// the collection, parent and match: one given to another list is refused
// (InvalidArgument naming page-token), and whatever it holds, a page never
// leaves parent.
func (r *Records[M]) ListPage(ctx context.Context, parent string, page PageRequest) ([]M, string, error) {
	key := fmt.Sprintf("p\x00%s\x00%d\x00%s\x00%x", parent, page.Size, page.Token, pageBinding("", "", page.Match))
	return cachedPage(ctx, r, cacheUnder(r.cache, parent), groupOf(parent), key, bson.D{{Key: "parent", Value: parent}, live}, parent, page)
}

// allParents is what a token of ScanPage is bound to in place of a parent
// (a parent is an id, and no id holds a NUL).
const allParents = "\x00all"

// ScanPage is ListPage over the live objects of every parent, ordered by
// id: for an internal caller that reads a whole collection a page at a
// time (core's facts reconcile). page.Match is ignored.
func (r *Records[M]) ScanPage(ctx context.Context, page PageRequest) ([]M, string, error) {
	page.Match = nil
	return cachedPage(ctx, r, r.cache, everyGroup, fmt.Sprintf("s\x00%d\x00%s", page.Size, page.Token), bson.D{live}, allParents, page)
}

// cachedPage is listPage kept in memory in c (cache.go) under group and
// key.
func cachedPage[M proto.Message](ctx context.Context, r *Records[M], c *readCache, group, key string, filter bson.D, parent string, page PageRequest) ([]M, string, error) {
	type answer struct {
		msgs []M
		next string
	}
	a, err := cachedRead(ctx, c, group, key, func(ctx context.Context) (answer, int, error) {
		msgs, next, err := listPage(ctx, r, filter, parent, page)
		return answer{msgs, next}, len(msgs), err
	}, func(a answer) answer { return answer{cloneAll(a.msgs), a.next} })
	return a.msgs, a.next, err
}

// listPage reads the page of the objects of r filter matches that page
// asks for, with its tokens bound to parent and page.Match.
func listPage[M proto.Message](ctx context.Context, r *Records[M], filter bson.D, parent string, page PageRequest) ([]M, string, error) {
	size := page.Size
	switch {
	case size < 0:
		return nil, "", errs.Invalid("page-size", "must not be negative, got %d", size)
	case size == 0:
		size = DefaultPageSize
	case size > MaxPageSize:
		size = MaxPageSize
	}
	for _, k := range slices.Sorted(maps.Keys(page.Match)) {
		filter = append(filter, bson.E{Key: "body." + k, Value: page.Match[k]})
	}
	bind := pageBinding(r.coll.Name(), parent, page.Match)
	if page.Token != "" {
		after, err := decodePageToken(page.Token, bind)
		if err != nil {
			return nil, "", err
		}
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: after}}})
	}
	// The whole page in the first batch: one command, not a find and a
	// getMore per further batch (the server's first batch is 101).
	items, err := r.findOpts(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).
		SetLimit(int64(size)+1).SetBatchSize(size+1))
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(items) > int(size) {
		items = items[:size]
		next = encodePageToken(bind, items[len(items)-1].ID)
	}
	out := make([]M, 0, len(items))
	for _, it := range items {
		out = append(out, it.Msg)
	}
	return out, next, nil
}

// pageBinding is what a token is bound to: the list it was made for.
func pageBinding(collection, parent string, match map[string]string) [8]byte {
	h := sha256.New()
	h.Write([]byte(collection))
	h.Write([]byte{0})
	h.Write([]byte(parent))
	for _, k := range slices.Sorted(maps.Keys(match)) {
		h.Write([]byte{0})
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(match[k]))
	}
	var b [8]byte
	copy(b[:], h.Sum(nil))
	return b
}

const pageTokenVersion = 1

// encodePageToken makes the opaque token of the page after id: a version
// byte, the list's binding and the last id, base64url.
func encodePageToken(bind [8]byte, id string) string {
	b := make([]byte, 0, 1+len(bind)+len(id))
	b = append(b, pageTokenVersion)
	b = append(b, bind[:]...)
	b = append(b, id...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodePageToken(tok string, bind [8]byte) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) <= 1+len(bind) || b[0] != pageTokenVersion {
		return "", errs.Invalid(pageField, "is not a page token of this API")
	}
	if subtle.ConstantTimeCompare(b[1:1+len(bind)], bind[:]) != 1 {
		return "", errs.Invalid(pageField, "belongs to another list: start again without it")
	}
	id := string(b[1+len(bind):])
	if !utf8.ValidString(id) {
		return "", errs.Invalid(pageField, "is not a page token of this API")
	}
	return id, nil
}

// Item is a stored object with its id, its parent's and the version it
// was read at.
type Item[M proto.Message] struct {
	ID, Parent string
	Msg        M
	Version    int64
	Deleting   bool
}

// Match reads every object, marked for deletion or not, whose fields
// (protobuf field names, nested with ".") equal the given values.
func (r *Records[M]) Match(ctx context.Context, fields map[string]string) ([]Item[M], error) {
	filter := bson.D{}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		filter = append(filter, bson.E{Key: "body." + k, Value: fields[k]})
	}
	return r.find(ctx, filter)
}

// Children reads every object under parent, those marked for deletion
// included: what must be gone before the parent may go.
func (r *Records[M]) Children(ctx context.Context, parent string) ([]Item[M], error) {
	return r.find(ctx, bson.D{{Key: "parent", Value: parent}})
}

// Deleting reads every object marked for deletion: the work a cleanup loop
// has left.
func (r *Records[M]) Deleting(ctx context.Context) ([]Item[M], error) {
	return r.find(ctx, bson.D{{Key: "deleting", Value: true}})
}

// find reads the objects filter matches, ordered by id; kept in memory
// (cache.go) under the group of a filter whose first field is a parent,
// under every group otherwise.
func (r *Records[M]) find(ctx context.Context, filter bson.D) ([]Item[M], error) {
	c, group := r.cache, everyGroup
	if len(filter) > 0 && filter[0].Key == "parent" {
		if p, ok := filter[0].Value.(string); ok {
			c, group = cacheUnder(r.cache, p), groupOf(p)
		}
	}
	if c == nil {
		return findSorted(ctx, r, filter)
	}
	key, err := bson.MarshalExtJSON(filter, true, false)
	if err != nil {
		return nil, errs.Internal(err, "store error")
	}
	return cachedRead(ctx, c, group, "f\x00"+string(key), func(ctx context.Context) ([]Item[M], int, error) {
		items, err := findSorted(ctx, r, filter)
		return items, len(items), err
	}, func(in []Item[M]) []Item[M] {
		out := slices.Clone(in)
		for i := range out {
			out[i].Msg = proto.Clone(out[i].Msg).(M)
		}
		return out
	})
}

// findSorted is find from the store.
func findSorted[M proto.Message](ctx context.Context, r *Records[M], filter bson.D) ([]Item[M], error) {
	return r.findOpts(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
}

func (r *Records[M]) findOpts(ctx context.Context, filter bson.D, opts *options.FindOptionsBuilder) ([]Item[M], error) {
	cur, err := r.coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, mapErr("list "+r.kind, err)
	}
	var recs []record
	if err := cur.All(ctx, &recs); err != nil {
		return nil, mapErr("list "+r.kind, err)
	}
	out := make([]Item[M], 0, len(recs))
	for _, rec := range recs {
		v, err := r.decode(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, Item[M]{ID: rec.ID, Parent: rec.Parent, Msg: v.Msg, Version: rec.Version, Deleting: rec.Deleting})
	}
	return out, nil
}

// MarkDeleting marks the object for deletion, conditionally on it being
// live and unchanged since read: from then on Get and List no longer show
// it, updates fail and a Create of the same id is refused. It returns the
// object as it was. The caller then removes what depends on it and Deletes
// it, or, if it must stay after all, Unmarks it.
func (r *Records[M]) MarkDeleting(ctx context.Context, id string) (M, error) {
	var zero M
	cur, err := getRecord(ctx, r, id)
	if err != nil {
		return zero, err
	}
	res, err := r.coll.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "version", Value: cur.Version}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "deleting", Value: true}, {Key: "version", Value: cur.Version + 1}}}})
	if err != nil {
		return zero, wrote(ctx, r.cache, id, mapErr("mark "+r.kind, err))
	}
	if res.MatchedCount != 1 {
		return zero, errs.Aborted("%s %q was changed by another request; retry", r.kind, id)
	}
	return cur.Msg, wrote(ctx, r.cache, id, nil)
}

// Unmark makes an object marked for deletion live again.
func (r *Records[M]) Unmark(ctx context.Context, id string) error {
	_, err := r.coll.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "deleting", Value: true}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "deleting", Value: false}}}, {Key: "$inc", Value: bson.D{{Key: "version", Value: 1}}}})
	return wrote(ctx, r.cache, id, mapErr("unmark "+r.kind, err))
}

// DeleteUnder removes every object under parent and reports how many went.
// Removing nothing is not an error: a cascade is rerun until it has.
func (r *Records[M]) DeleteUnder(ctx context.Context, parent string) (int64, error) {
	res, err := r.coll.DeleteMany(ctx, bson.D{{Key: "parent", Value: parent}})
	if err != nil {
		return 0, wrote(ctx, r.cache, parent, mapErr("delete "+r.kind, err))
	}
	if res.DeletedCount > 0 {
		return res.DeletedCount, wrote(ctx, r.cache, parent, nil)
	}
	return 0, nil
}

// Update replaces the object if it is still at version; Aborted if another
// writer got there first, NotFound if it is gone. Secrets given replace the
// stored ones of the same name; the others are kept.
func (r *Records[M]) Update(ctx context.Context, id string, version int64, msg M, secrets ...Secret) error {
	body, err := toBSON(msg)
	if err != nil {
		return err
	}
	set := bson.D{{Key: "body", Value: body}, {Key: "version", Value: version + 1}}
	if len(secrets) > 0 {
		var cur record
		err := r.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "version", Value: version}}).Decode(&cur)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return mapErr("update "+r.kind, err)
		}
		sealed, err := r.store.seal(r.coll.Name(), id, cur.Secrets, secrets)
		if err != nil {
			return err
		}
		set = append(set, bson.E{Key: "secrets", Value: sealed})
	}
	res, err := r.coll.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: id}, {Key: "version", Value: version}, live},
		bson.D{{Key: "$set", Value: set}})
	if err != nil {
		return wrote(ctx, r.cache, id, mapErr("update "+r.kind, err))
	}
	if res.MatchedCount == 1 {
		return wrote(ctx, r.cache, id, nil)
	}
	if _, err := getRecord(ctx, r, id); err != nil {
		return err
	}
	return errs.Aborted("%s %q was changed by another request; read it again and retry", r.kind, id)
}

// Modify reads the object (from the store: a write does not answer from
// memory, cache.go), applies change and writes it back conditionally on
// the version read. A concurrent writer makes it fail with Aborted rather
// than lose either update.
func (r *Records[M]) Modify(ctx context.Context, id string, change func(M) error) (M, error) {
	var zero M
	cur, err := getRecord(ctx, r, id)
	if err != nil {
		return zero, err
	}
	if err := change(cur.Msg); err != nil {
		return zero, err
	}
	if err := r.Update(ctx, id, cur.Version, cur.Msg); err != nil {
		return zero, err
	}
	return cur.Msg, nil
}

// Delete removes the object; NotFound if missing.
func (r *Records[M]) Delete(ctx context.Context, id string) error {
	res, err := r.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
	if err != nil {
		return wrote(ctx, r.cache, id, mapErr("delete "+r.kind, err))
	}
	if res.DeletedCount == 0 {
		return errs.NotFound("%s %q not found", r.kind, id)
	}
	return wrote(ctx, r.cache, id, nil)
}

func (r *Records[M]) decode(rec record) (Versioned[M], error) {
	msg := r.newMsg()
	if err := decodeBody(rec.Body, msg); err != nil {
		return Versioned[M]{}, errs.Internal(fmt.Errorf("decode %s %q: %w", r.kind, rec.ID, err), "store error")
	}
	return Versioned[M]{Msg: msg, Version: rec.Version}, nil
}

// toBSON stores a message as the document of its protobuf JSON form (proto
// field names), so records stay readable with any MongoDB tool.
func toBSON(msg proto.Message) (bson.Raw, error) {
	j, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(msg)
	if err != nil {
		return nil, errs.Internal(err, "encode record")
	}
	var d bson.D
	if err := bson.UnmarshalExtJSON(j, false, &d); err != nil {
		return nil, errs.Internal(err, "encode record")
	}
	raw, err := bson.Marshal(d)
	if err != nil {
		return nil, errs.Internal(err, "encode record")
	}
	return raw, nil
}

func fromBSON(raw bson.Raw, msg proto.Message) error {
	j, err := bson.MarshalExtJSON(raw, false, false)
	if err != nil {
		return err
	}
	return protojson.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(j, msg)
}

// Key joins the names on a record's path (project, logical cloud, name...)
// into its id. Names are DNS-1123 labels, so "/" cannot occur in them.
func Key(names ...string) string { return strings.Join(names, "/") }

// Put stores msg under id (under parent) whether or not id exists, with
// no version check: one update by _id alone, which the embedded store
// serves from its index (an Update, conditional on the version, reads the
// whole collection there). For records a single writer owns, such as
// those of a shard lease holder, where a lost race costs nothing.
func (r *Records[M]) Put(ctx context.Context, id, parent string, msg M) error {
	if err := grouped(r, id, parent); err != nil {
		return err
	}
	body, err := toBSON(msg)
	if err != nil {
		return err
	}
	_, err = r.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "parent", Value: parent}, {Key: "body", Value: body}}},
			{Key: "$inc", Value: bson.D{{Key: "version", Value: int64(1)}}}},
		options.UpdateOne().SetUpsert(true))
	return wrote(ctx, r.cache, id, mapErr("put "+r.kind, err))
}
