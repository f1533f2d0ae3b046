package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Transition locks (docs/lifecycle.md "Replicas"): a lifecycle transition
// reads the state, acts on the resource synchronizer and then stores the
// phase, and two of them interleaving could leave the phase contradicting
// what was submitted. So a transition holds a lock on its logical cloud
// (traffic group, mesh cluster) for its whole length, across every core
// replica on the store: a lease in the collection core_locks, made if
// absent, kept renewed while the transition runs and deleted at its end.
// A replica that dies holding one leaves it to expire after the lease's
// time to live, when another replica takes it over.
//
// Within one process, a second transition of the same logical cloud waits
// for the first (as it always did) and then runs against the state the
// first left: a second apply is refused by that state (409 WRONG_STATE), a
// second terminate is the no-op that terminate from Terminating is. A
// transition that finds another replica's lease does not wait: it is
// refused at once with 409 CONCURRENT_UPDATE, and the client retries.

// DefaultLockTTL is how long a transition lock outlives a core replica
// that died holding it. It is renewed every third of it while the
// transition runs, so it bounds nothing but that wait.
const DefaultLockTTL = 30 * time.Second

// lockPoll is how often a lock that waits for another replica's lease (the
// mesh records') asks again.
const lockPoll = 100 * time.Millisecond

// lockRelease bounds the deletion of a lease at a transition's end; a
// lease that could not be deleted expires.
const lockRelease = 5 * time.Second

// lockStore is what every lock of one core replica shares: the leases and
// the replica's name in them.
type lockStore struct {
	leases *store.Leases
	holder string
	// ttl is DefaultLockTTL but in tests.
	ttl time.Duration
	log *zap.Logger
}

func newLockStore(st *store.Store, log *zap.Logger) *lockStore {
	return &lockStore{leases: store.NewLeases(st, LockCollection), holder: replicaName(), ttl: DefaultLockTTL, log: log}
}

// replicaName names this core replica in the locks it holds, once per
// Build (NewLogicalClouds): two core services built in one process (tests
// run several programs in one) are two holders, so a random part is added
// to store.ReplicaID's.
func replicaName() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return store.ReplicaID("core") + "/" + hex.EncodeToString(b[:])
}

// keyLocks are the locks of one kind of thing (logical clouds, traffic
// groups, mesh cluster records). Each kind has its own local locks, so
// that a transition holding one kind's lock may take another's.
type keyLocks struct {
	// kind prefixes the lease's name ("lc/p1/lc-1").
	kind string
	// wait is how long a lock waits for another replica's lease before
	// refusing (0: it refuses at once).
	wait time.Duration
	// busy says what is locked, for the 409's message.
	busy  func(name string) string
	store *lockStore

	mu   sync.Mutex
	held map[string]chan struct{}
}

func newKeyLocks(ls *lockStore, kind string, wait time.Duration, busy func(string) string) *keyLocks {
	return &keyLocks{kind: kind, wait: wait, busy: busy, store: ls, held: map[string]chan struct{}{}}
}

// lock takes the lock on key (name is what a message calls it) for this
// replica: it waits for another transition of this process holding it,
// then takes the lease. Another replica's live lease is 409
// CONCURRENT_UPDATE (after k.wait). The context returned is ctx, ended
// too if the lease is lost (not renewed for half its time to live); the
// function returned releases the lock.
func (k *keyLocks) lock(ctx context.Context, key, name string) (context.Context, func(), error) {
	unlocal, err := k.local(ctx, key)
	if err != nil {
		return ctx, nil, err
	}
	held, err := k.lease(ctx, key, name)
	if err != nil {
		unlocal()
		return ctx, nil, err
	}
	lctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-held.Lost:
			k.store.log.Warn("transition lock lost: the transition is stopped", zap.String("lock", held.Name))
			cancel(errs.Aborted("the lock on %s was lost (the store did not answer in time): read its status and retry", name))
		case <-done:
		}
	}()
	return lctx, func() {
		close(done)
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), lockRelease)
		defer rcancel()
		if err := held.Release(rctx); err != nil {
			k.store.log.Warn("release transition lock: it expires instead", zap.String("lock", held.Name), zap.Error(err))
		}
		unlocal()
	}, nil
}

// lease takes key's lease, waiting up to k.wait while another replica
// holds it.
func (k *keyLocks) lease(ctx context.Context, key, name string) (*store.Held, error) {
	holder, ttl := k.store.holder, k.store.ttl
	deadline := time.Now().Add(k.wait)
	for {
		held, err := k.store.leases.Hold(ctx, k.kind+"/"+key, holder, ttl)
		var he *store.HeldError
		switch {
		case err == nil:
			return held, nil
		case !errors.As(err, &he) && errs.Code(err) != codes.Aborted:
			return nil, err
		case !time.Now().Before(deadline):
			return nil, errs.Aborted("%s: retry shortly", k.busy(name))
		}
		t := time.NewTimer(lockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-t.C:
		}
	}
}

// local waits until no other transition of this process holds key, then
// holds it.
func (k *keyLocks) local(ctx context.Context, key string) (func(), error) {
	for {
		k.mu.Lock()
		ch, busy := k.held[key]
		if !busy {
			ch = make(chan struct{})
			k.held[key] = ch
			k.mu.Unlock()
			return func() {
				k.mu.Lock()
				delete(k.held, key)
				k.mu.Unlock()
				close(ch)
			}, nil
		}
		k.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-ch:
		}
	}
}
