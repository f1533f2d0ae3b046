package store

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
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
