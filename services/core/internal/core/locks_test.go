package core

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

func replicaLocks(st *store.Store, wait time.Duration, ttl time.Duration) *keyLocks {
	ls := newLockStore(st, zap.NewNop())
	ls.ttl = ttl
	return newKeyLocks(ls, "lc", wait, func(name string) string { return "another transition of " + name + " is in progress" })
}

// TestLocksAcrossReplicas: two replicas on one store never hold one key at
// once; the second is refused with 409 CONCURRENT_UPDATE at once (or
// after its wait), and takes the key once the first released it. Other
// keys are free meanwhile.
func TestLocksAcrossReplicas(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	a, b := replicaLocks(st, 0, DefaultLockTTL), replicaLocks(st, 300*time.Millisecond, DefaultLockTTL)

	_, unlockA, err := a.lock(ctx, "p1/lc-1", `logical cloud "lc-1"`)
	require.NoError(t, err)
	_, _, err = b.lock(ctx, "p1/lc-1", `logical cloud "lc-1"`)
	require.Equal(t, codes.Aborted, errs.Code(err), "%v", err)
	require.Equal(t, errs.ReasonConcurrentUpdate, errs.ReasonOf(errs.ToStatus(err)))
	require.Contains(t, err.Error(), `another transition of logical cloud "lc-1" is in progress`)

	_, unlockOther, err := b.lock(ctx, "p1/lc-2", `logical cloud "lc-2"`)
	require.NoError(t, err, "another key is free")
	unlockOther()

	unlockA()
	leases, err := store.NewLeases(st, LockCollection).List(ctx)
	require.NoError(t, err)
	require.Empty(t, leases, "a released lock leaves no lease")
	_, unlockB, err := b.lock(ctx, "p1/lc-1", `logical cloud "lc-1"`)
	require.NoError(t, err)
	_, _, err = a.lock(ctx, "p1/lc-1", `logical cloud "lc-1"`)
	require.Equal(t, codes.Aborted, errs.Code(err), "%v", err)
	unlockB()
}

// TestLocksWithinAReplica: a second transition of the same process waits
// for the first, then runs; one whose caller gives up first is told so.
func TestLocksWithinAReplica(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	a := replicaLocks(st, 0, DefaultLockTTL)
	_, unlock, err := a.lock(ctx, "p1/lc-1", "lc-1")
	require.NoError(t, err)

	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = a.lock(gone, "p1/lc-1", "lc-1")
	require.Equal(t, codes.Canceled, errs.Code(err), "%v", err)

	got := make(chan error, 1)
	go func() {
		_, unlock2, err := a.lock(ctx, "p1/lc-1", "lc-1")
		if err == nil {
			unlock2()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the second transition did not wait for the first: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	unlock()
	require.NoError(t, <-got)
}

// TestLockOfADeadReplicaExpires: a replica that died holding a lock (its
// lease neither renewed nor deleted) blocks the key until the lease's time
// to live has passed; then another replica takes it over.
func TestLockOfADeadReplicaExpires(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	dead := store.NewLeases(st, LockCollection)
	_, err := dead.Acquire(ctx, "lc/p1/lc-1", "core@dead-host/1/1", time.Second)
	require.NoError(t, err)

	b := replicaLocks(st, 0, DefaultLockTTL)
	_, _, err = b.lock(ctx, "p1/lc-1", "lc-1")
	require.Equal(t, codes.Aborted, errs.Code(err), "%v", err)
	require.Eventually(t, func() bool {
		_, unlock, err := b.lock(ctx, "p1/lc-1", "lc-1")
		if err != nil {
			return false
		}
		unlock()
		return true
	}, 20*time.Second, 100*time.Millisecond)
}
