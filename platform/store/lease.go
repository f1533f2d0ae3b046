package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"google.golang.org/grpc/codes"

	"github.com/dcm-project/dcm/platform/errs"
)

// Leases: replicas of a service share work through named leases kept in
// the store (a collection of small documents), each with a holder, an
// expiry and an epoch. A lease is taken only when it is free or expired,
// and renewed with a write conditional on the version read, so two
// replicas never both believe they hold it — as long as a holder stops
// working before its lease can expire (Held.Lost fires at half the
// time to live without a renewal) and the replicas' clocks agree to well
// within the time to live, the same assumption Kubernetes' leader leases
// make. The epoch grows each time the holder changes: a record written
// under a lease can carry it, and a write conditional on it fences off a
// holder that lost the lease (docs/rsync.md, "Replicas").
//
// The documents are plain BSON, not API objects: {_id: name, holder,
// epoch, expires (Unix ms), version}.

// Lease is one holder's view of a lease.
type Lease struct {
	Name, Holder string
	// Epoch grows by one each time the lease changes holder.
	Epoch   int64
	Expires time.Time
	version int64
}

// Leases is a collection of leases.
type Leases struct {
	coll *mongo.Collection
	now  func() time.Time
}

type leaseDoc struct {
	ID      string `bson:"_id"`
	Holder  string `bson:"holder"`
	Epoch   int64  `bson:"epoch"`
	Expires int64  `bson:"expires"`
	Version int64  `bson:"version"`
}

// NewLeases opens the collection name for leases.
func NewLeases(s *Store, name string) *Leases {
	s.open(name)
	return &Leases{coll: s.db.Collection(name), now: time.Now}
}

// ReplicaID names this process among a service's replicas: the program,
// the host and the process id, with the start time so that a restarted
// process is a new holder.
func ReplicaID(program string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s@%s/%d/%d", program, host, os.Getpid(), time.Now().UnixMilli())
}

// HeldError is the error of Acquire when another holder has the lease.
type HeldError struct {
	Name, Holder string
	Expires      time.Time
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is held by %s until %s", e.Name, e.Holder, e.Expires.UTC().Format(time.RFC3339Nano))
}

// Acquire takes the lease name for holder for ttl: it makes it if there is
// none, takes it over if it expired (the epoch grows) and renews it if
// holder has it. Another holder's live lease gives a *HeldError; losing
// a race for it gives Aborted.
func (l *Leases) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (Lease, error) {
	now := l.now()
	var cur leaseDoc
	err := l.coll.FindOne(ctx, bson.D{{Key: "_id", Value: name}}).Decode(&cur)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		doc := leaseDoc{ID: name, Holder: holder, Epoch: 1, Expires: now.Add(ttl).UnixMilli(), Version: 1}
		if _, err := l.coll.InsertOne(ctx, doc); err != nil {
			if mongo.IsDuplicateKeyError(err) {
				return Lease{}, errs.Aborted("lease %s was taken by another replica at the same time", name)
			}
			return Lease{}, mapErr("acquire lease", err)
		}
		return doc.lease(), nil
	case err != nil:
		return Lease{}, mapErr("acquire lease", err)
	}
	next := cur
	next.Version, next.Expires = cur.Version+1, now.Add(ttl).UnixMilli()
	if cur.Holder != holder {
		if time.UnixMilli(cur.Expires).After(now) {
			return Lease{}, &HeldError{Name: name, Holder: cur.Holder, Expires: time.UnixMilli(cur.Expires)}
		}
		next.Holder, next.Epoch = holder, cur.Epoch+1
	}
	return l.replace(ctx, cur, next)
}

// Renew extends a lease holder has, keeping its epoch; Aborted if it was
// taken over or released meanwhile.
func (l *Leases) Renew(ctx context.Context, lease Lease, ttl time.Duration) (Lease, error) {
	cur := leaseDoc{ID: lease.Name, Holder: lease.Holder, Epoch: lease.Epoch, Version: lease.version}
	next := cur
	next.Version, next.Expires = cur.Version+1, l.now().Add(ttl).UnixMilli()
	return l.replace(ctx, cur, next)
}

// replace writes next over cur if the stored lease is still cur.
func (l *Leases) replace(ctx context.Context, cur, next leaseDoc) (Lease, error) {
	res, err := l.coll.ReplaceOne(ctx,
		bson.D{{Key: "_id", Value: cur.ID}, {Key: "version", Value: cur.Version}, {Key: "holder", Value: cur.Holder}, {Key: "epoch", Value: cur.Epoch}},
		next)
	if err != nil {
		return Lease{}, mapErr("write lease", err)
	}
	if res.MatchedCount != 1 {
		return Lease{}, errs.Aborted("lease %s was changed by another replica", cur.ID)
	}
	return next.lease(), nil
}

// Yield ends a lease now and keeps its epoch, so that the next holder's
// epoch is still greater: for a lease whose epoch fences writes.
func (l *Leases) Yield(ctx context.Context, lease Lease) error {
	cur := leaseDoc{ID: lease.Name, Holder: lease.Holder, Epoch: lease.Epoch, Version: lease.version}
	next := cur
	next.Version, next.Expires = cur.Version+1, 0
	_, err := l.replace(ctx, cur, next)
	return err
}

// Release deletes a lease holder has, if it still has it: for a lock whose
// epoch fences nothing, so that the collection holds only the locks in use.
func (l *Leases) Release(ctx context.Context, lease Lease) error {
	_, err := l.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: lease.Name}, {Key: "holder", Value: lease.Holder}, {Key: "epoch", Value: lease.Epoch}})
	return mapErr("release lease", err)
}

// List reads every lease.
func (l *Leases) List(ctx context.Context) ([]Lease, error) {
	cur, err := l.coll.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, mapErr("list leases", err)
	}
	var docs []leaseDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, mapErr("list leases", err)
	}
	out := make([]Lease, len(docs))
	for i, d := range docs {
		out[i] = d.lease()
	}
	return out, nil
}

func (d leaseDoc) lease() Lease {
	return Lease{Name: d.ID, Holder: d.Holder, Epoch: d.Epoch, Expires: time.UnixMilli(d.Expires), version: d.Version}
}

// Held is a lease kept renewed by a goroutine until Release.
type Held struct {
	Lease
	// Lost is closed when the lease could not be renewed for half its
	// time to live, or was taken over: the holder must stop the work it
	// guards at once (it may still be taken over only after it expires).
	Lost <-chan struct{}

	stop chan struct{}
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	cur  Lease
	l    *Leases
}

// Hold acquires name for holder (as Acquire) and renews it every third of
// ttl until Release. It inserts first: a held lease is a lock that Release
// deletes, so it is usually absent, and the unique _id decides between
// two holders; only when one is there (held, expired, or this holder's)
// is it read and taken as Acquire takes it.
func (l *Leases) Hold(ctx context.Context, name, holder string, ttl time.Duration) (*Held, error) {
	doc := leaseDoc{ID: name, Holder: holder, Epoch: 1, Expires: l.now().Add(ttl).UnixMilli(), Version: 1}
	lease := doc.lease()
	_, err := l.coll.InsertOne(ctx, doc)
	switch {
	case mongo.IsDuplicateKeyError(err):
		if lease, err = l.Acquire(ctx, name, holder, ttl); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, mapErr("acquire lease", err)
	}
	lost := make(chan struct{})
	h := &Held{Lease: lease, Lost: lost, stop: make(chan struct{}), done: make(chan struct{}), cur: lease, l: l}
	go h.renew(ttl, lost)
	return h, nil
}

func (h *Held) renew(ttl time.Duration, lost chan struct{}) {
	defer close(h.done)
	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	renewed := time.Now()
	for {
		select {
		case <-h.stop:
			return
		case <-tick.C:
		}
		h.mu.Lock()
		cur := h.cur
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), ttl/3)
		next, err := h.l.Renew(ctx, cur, ttl)
		cancel()
		switch {
		case err == nil:
			h.mu.Lock()
			h.cur = next
			h.mu.Unlock()
			renewed = time.Now()
		case errs.Code(err) == codes.Aborted || time.Since(renewed) >= ttl/2:
			close(lost)
			<-h.stop
			return
		}
	}
}

// Release stops renewing and deletes the lease (Leases.Release).
func (h *Held) Release(ctx context.Context) error {
	h.once.Do(func() { close(h.stop) })
	<-h.done
	h.mu.Lock()
	cur := h.cur
	h.mu.Unlock()
	return h.l.Release(ctx, cur)
}

// RenewAll extends every lease holder has (not those it yielded), in one
// write, and reports how many it extended: for a replica holding many (rsync's shards). Each
// renewed lease's version grows, so that a takeover racing with it (read
// before, written after) is refused.
func (l *Leases) RenewAll(ctx context.Context, holder string, ttl time.Duration) (int64, error) {
	// Not a yielded lease (expires 0): it is free for the others.
	res, err := l.coll.UpdateMany(ctx, bson.D{{Key: "holder", Value: holder}, {Key: "expires", Value: bson.D{{Key: "$gt", Value: 0}}}},
		bson.D{
			{Key: "$set", Value: bson.D{{Key: "expires", Value: l.now().Add(ttl).UnixMilli()}}},
			{Key: "$inc", Value: bson.D{{Key: "version", Value: 1}}},
		})
	if err != nil {
		return 0, mapErr("renew leases", err)
	}
	return res.ModifiedCount, nil
}

// Supersede gives holder the lease cur (as read by List) whatever its
// expiry, with the next epoch, if it is still as read: for a lease that
// expired, or that an earlier run of the same replica held (a restarted
// replica takes its work back at once instead of waiting for its old
// leases to expire).
func (l *Leases) Supersede(ctx context.Context, cur Lease, holder string, ttl time.Duration) (Lease, error) {
	from := leaseDoc{ID: cur.Name, Holder: cur.Holder, Epoch: cur.Epoch, Version: cur.version}
	next := leaseDoc{ID: cur.Name, Holder: holder, Epoch: cur.Epoch + 1, Expires: l.now().Add(ttl).UnixMilli(), Version: cur.version + 1}
	return l.replace(ctx, from, next)
}
