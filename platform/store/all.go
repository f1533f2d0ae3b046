package store

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/dcm-project/dcm/platform/errs"
)

// All reads every object of the collection, those marked for deletion too:
// for a process that loads a whole collection at once (one scan instead of
// one per parent).
func (r *Records[M]) All(ctx context.Context) ([]Item[M], error) {
	return r.find(ctx, bson.D{})
}

// Versions reads the version of every object of the collection by id (the
// bodies are not read): for replicas that poll for changes others made.
func (r *Records[M]) Versions(ctx context.Context) (map[string]int64, error) {
	cur, err := r.coll.Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "version", Value: 1}}))
	if err != nil {
		return nil, mapErr("list "+r.kind, err)
	}
	var docs []struct {
		ID      string `bson:"_id"`
		Version int64  `bson:"version"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, mapErr("list "+r.kind, err)
	}
	out := make(map[string]int64, len(docs))
	for _, d := range docs {
		out[d.ID] = d.Version
	}
	return out, nil
}

// DeleteVersion removes the object if it is still at version; Aborted if
// it changed, NotFound if it is gone: a purge that must not remove what a
// concurrent writer just stored.
func (r *Records[M]) DeleteVersion(ctx context.Context, id string, version int64) error {
	res, err := r.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "version", Value: version}})
	if err != nil {
		return wrote(ctx, r.cache, id, mapErr("delete "+r.kind, err))
	}
	if res.DeletedCount == 1 {
		return wrote(ctx, r.cache, id, nil)
	}
	if _, err := getRecord(ctx, r, id); err != nil {
		return err
	}
	return errs.Aborted("%s %q was changed by another request; read it again and retry", r.kind, id)
}

// Stamps is a collection of small {_id, version} documents: the version
// of each record of another collection as its writer last stored it, for
// replicas that poll for changes without reading the records themselves
// (a rollout record with 10,000 clusters is large, and the embedded store
// decodes every document a query reads, projection or not).
type Stamps struct{ coll *mongo.Collection }

// NewStamps opens the collection name for stamps.
func NewStamps(s *Store, name string) *Stamps {
	s.open(name)
	return &Stamps{coll: s.db.Collection(name)}
}

// Set stores id's version.
func (s *Stamps) Set(ctx context.Context, id string, version int64) error {
	_, err := s.coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: id}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "version", Value: version}}}}, options.UpdateOne().SetUpsert(true))
	return mapErr("stamp", err)
}

// Delete removes id's stamp.
func (s *Stamps) Delete(ctx context.Context, id string) error {
	_, err := s.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
	return mapErr("delete stamp", err)
}

// All reads every stamp.
func (s *Stamps) All(ctx context.Context) (map[string]int64, error) {
	cur, err := s.coll.Find(ctx, bson.D{})
	if err != nil {
		return nil, mapErr("list stamps", err)
	}
	var docs []struct {
		ID      string `bson:"_id"`
		Version int64  `bson:"version"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, mapErr("list stamps", err)
	}
	out := make(map[string]int64, len(docs))
	for _, d := range docs {
		out[d.ID] = d.Version
	}
	return out, nil
}

// Get reads id's stamp; false if it has none.
func (s *Stamps) Get(ctx context.Context, id string) (int64, bool, error) {
	var doc struct {
		Version int64 `bson:"version"`
	}
	err := s.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, mapErr("read stamp", err)
	}
	return doc.Version, true, nil
}
