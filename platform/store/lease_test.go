package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// TestLeases walks a lease through its life on the store: taken, refused
// to another holder while live, renewed with the same epoch, taken over
// after it expired with the next epoch, and the old holder's renewal and
// yield refused.
func TestLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := store.NewLeases(storetest.Open(t), "leases")
	// live is long enough that nothing expires while the test means it to
	// hold, whatever the machine's load; short is the renewal that lets
	// the lease lapse, waited for by polling.
	const live, short = time.Minute, 200 * time.Millisecond

	a, err := l.Acquire(ctx, "shard-1", "a", live)
	require.NoError(t, err)
	require.Equal(t, int64(1), a.Epoch)

	_, err = l.Acquire(ctx, "shard-1", "b", live)
	var held *store.HeldError
	require.True(t, errors.As(err, &held), "%v", err)
	require.Equal(t, "a", held.Holder)

	a2, err := l.Renew(ctx, a, short)
	require.NoError(t, err)
	require.Equal(t, a.Epoch, a2.Epoch, "a renewal keeps the epoch")
	_, err = l.Renew(ctx, a, live)
	require.Equal(t, codes.Aborted, code(err), "a renewal from a stale read is refused")

	var b store.Lease
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err = l.Acquire(ctx, "shard-1", "b", live)
		if err == nil {
			break
		}
		require.True(t, errors.As(err, &held), "%v", err)
		require.True(t, time.Now().Before(deadline), "a's lease of %s did not lapse in 30 s", short)
		time.Sleep(short / 4)
	}
	require.Equal(t, int64(2), b.Epoch, "a takeover grows the epoch")
	_, err = l.Renew(ctx, a2, live)
	require.Equal(t, codes.Aborted, code(err), "the old holder cannot renew")
	require.Equal(t, codes.Aborted, code(l.Yield(ctx, a2)), "nor yield")

	require.NoError(t, l.Yield(ctx, b))
	c, err := l.Acquire(ctx, "shard-1", "c", live)
	require.NoError(t, err)
	require.Equal(t, int64(3), c.Epoch, "a yielded lease is free at once and keeps counting epochs")

	list, err := l.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "c", list[0].Holder)

	require.NoError(t, l.Release(ctx, c))
	list, err = l.List(ctx)
	require.NoError(t, err)
	require.Empty(t, list, "a released lock is deleted")
}

// TestLeaseRace has eight holders race for one free lease, twenty times:
// exactly one wins each time.
func TestLeaseRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := store.NewLeases(storetest.Open(t), "leases")
	for round := range 20 {
		name := "lock-" + string(rune('a'+round))
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := l.Acquire(ctx, name, string(rune('A'+i)), time.Minute)
				if err == nil {
					mu.Lock()
					won++
					mu.Unlock()
					return
				}
				var held *store.HeldError
				if !errors.As(err, &held) && code(err) != codes.Aborted {
					t.Errorf("acquire: %v", err)
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 1, won, "round %d", round)
	}
}

// TestHeldRenews keeps a lease held past several times its time to live,
// while another holder is refused; once released, the other takes it.
func TestHeldRenews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := store.NewLeases(storetest.Open(t), "leases")
	// Hold renews every ttl/3 and calls a lease lost when no renewal
	// succeeded for ttl/2: 2 s leaves a loaded machine's store room.
	const ttl = 2 * time.Second
	h, err := l.Hold(ctx, "lc/p/x", "a", ttl)
	require.NoError(t, err)
	time.Sleep(3 * ttl)
	select {
	case <-h.Lost:
		t.Fatal("a renewed lease was reported lost")
	default:
	}
	_, err = l.Acquire(ctx, "lc/p/x", "b", ttl)
	var held *store.HeldError
	require.True(t, errors.As(err, &held), "still held after 3 × ttl: %v", err)
	require.NoError(t, h.Release(ctx))
	_, err = l.Acquire(ctx, "lc/p/x", "b", ttl)
	require.NoError(t, err)
}
