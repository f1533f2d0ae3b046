package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/secrets"
)

// Secret is a named plaintext a record keeps apart from its readable body
// (a kubeconfig, a private key). It is sealed before it reaches the store
// (see package secrets) and only Records.Secret opens it.
type Secret struct {
	Name  string
	Value []byte
}

// sealedField is a stored secret: its name and the sealed value, a list
// entry rather than a map key so that names never become field names.
type sealedField struct {
	Name           string `bson:"name"`
	secrets.Sealed `bson:",inline"`
}

// aad binds a sealed value to its collection, record and name, so a value
// copied to another record does not open.
func aad(coll, id, name string) []byte { return []byte(coll + "\x00" + id + "\x00" + name) }

func (s *Store) seal(coll, id string, cur []sealedField, add []Secret) ([]sealedField, error) {
	if len(add) == 0 {
		return cur, nil
	}
	if s.keyring == nil {
		return nil, errs.Internal(errors.New("store has no keyring"), "store error")
	}
	out := slices.Clone(cur)
	for _, sec := range add {
		sealed, err := s.keyring.Seal(sec.Value, aad(coll, id, sec.Name))
		if err != nil {
			return nil, errs.Internal(err, "seal secret")
		}
		f := sealedField{Name: sec.Name, Sealed: sealed}
		if i := slices.IndexFunc(out, func(f sealedField) bool { return f.Name == sec.Name }); i >= 0 {
			out[i] = f
		} else {
			out = append(out, f)
		}
	}
	return out, nil
}

// Secret opens the secret name of record id; NotFound if the record or the
// secret is missing.
func (r *Records[M]) Secret(ctx context.Context, id, name string) ([]byte, error) {
	var rec record
	err := r.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&rec)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, errs.NotFound("%s %q not found", r.kind, id)
	}
	if err != nil {
		return nil, mapErr("get "+r.kind, err)
	}
	i := slices.IndexFunc(rec.Secrets, func(f sealedField) bool { return f.Name == name })
	if i < 0 {
		return nil, errs.NotFound("%s %q has no %s", r.kind, id, name)
	}
	if r.store.keyring == nil {
		return nil, errs.Internal(errors.New("store has no keyring"), "store error")
	}
	v, err := r.store.keyring.Open(rec.Secrets[i].Sealed, aad(r.coll.Name(), id, name))
	if err != nil {
		return nil, errs.Internal(fmt.Errorf("open %s of %s %q: %w", name, r.kind, id, err), "cannot decrypt a stored secret")
	}
	return v, nil
}

// Rewrapped counts what Store.Rewrap did.
type Rewrapped struct {
	// KeyID is the root key-encryption key everything is now wrapped by:
	// each service's values are under the key derived from it for that
	// service ("<KeyID>@<service>"), or under KeyID itself when they were
	// stored through no service's view.
	KeyID string
	// Records and Values count what was rewrapped; Unchanged counts values
	// that already were under the current key.
	Records, Values, Unchanged int
}

// Rewrap wraps the data key of every secret in the collections this
// process opened with the current key of the keyring each was opened with
// (the service's, for a view). Each record is updated conditionally on its
// version and retried when a writer got there first, so it is safe while
// the services run. Run it after putting a new key first in the keyring;
// once it returns, older keys can be removed.
func (s *Store) Rewrap(ctx context.Context) (Rewrapped, error) {
	out := Rewrapped{}
	if k := s.base().keyring; k != nil {
		out.KeyID = secrets.RootID(k.Current())
	}
	for _, o := range s.owned() {
		if o.keyring == nil {
			return out, errs.Internal(errors.New("store has no keyring"), "store error")
		}
		if id := secrets.RootID(o.keyring.Current()); id != out.KeyID {
			return out, errs.FailedPrecondition("the keyring's current key is %q, but the one for %s is derived from %q: put the same key first for every service", out.KeyID, o.name, id)
		}
		coll := s.db.Collection(o.name)
		cur, err := coll.Find(ctx, bson.D{{Key: "secrets", Value: bson.D{{Key: "$exists", Value: true}}}})
		if err != nil {
			return out, mapErr("rewrap "+o.name, err)
		}
		var recs []record
		if err := cur.All(ctx, &recs); err != nil {
			return out, mapErr("rewrap "+o.name, err)
		}
		for _, rec := range recs {
			if err := rewrapRecord(ctx, o.keyring, coll, s.base().cacheOf(o.name), rec, &out); err != nil {
				return out, err
			}
		}
	}
	if out.KeyID == "" {
		return out, errs.Internal(errors.New("store has no keyring"), "store error")
	}
	return out, nil
}

func rewrapRecord(ctx context.Context, keyring *secrets.Keyring, coll *mongo.Collection, cache *readCache, rec record, out *Rewrapped) error {
	for attempt := 0; ; attempt++ {
		changed, unchanged := 0, 0
		fields := slices.Clone(rec.Secrets)
		for i := range fields {
			sealed, did, err := keyring.Rewrap(fields[i].Sealed)
			if err != nil {
				return errs.FailedPrecondition("rewrap %s of %s %q: %v", fields[i].Name, coll.Name(), rec.ID, err)
			}
			fields[i].Sealed = sealed
			if did {
				changed++
			} else {
				unchanged++
			}
		}
		if changed == 0 {
			out.Unchanged += unchanged
			return nil
		}
		res, err := coll.UpdateOne(ctx,
			bson.D{{Key: "_id", Value: rec.ID}, {Key: "version", Value: rec.Version}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "secrets", Value: fields}, {Key: "version", Value: rec.Version + 1}}}})
		if err != nil {
			return mapErr("rewrap "+coll.Name(), err)
		}
		if res.MatchedCount == 1 {
			// A kept read holds the version (cache.go).
			if err := cache.changed(ctx, rec.ID); err != nil {
				return err
			}
			out.Records++
			out.Values += changed
			out.Unchanged += unchanged
			return nil
		}
		if attempt == 10 {
			return errs.Aborted("rewrap %s %q: it kept changing; run the rewrap again", coll.Name(), rec.ID)
		}
		err = coll.FindOne(ctx, bson.D{{Key: "_id", Value: rec.ID}}).Decode(&rec)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil
		}
		if err != nil {
			return mapErr("rewrap "+coll.Name(), err)
		}
	}
}
