package dns

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// gate is a Connector that counts the passes reaching a cluster, notes
// two at once, and holds each until it is opened.
type gate struct {
	entered, inside atomic.Int64
	overlap         atomic.Bool
	mu              sync.Mutex
	open            chan struct{}
}

func (g *gate) connect(ctx context.Context, c Cluster) (*rest.Config, error) {
	g.entered.Add(1)
	if g.inside.Add(1) > 1 {
		g.overlap.Store(true)
	}
	defer g.inside.Add(-1)
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
	}
	return nil, fmt.Errorf("cluster %s/%s is unreachable", c.Provider, c.Cluster)
}

func (g *gate) reset() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.entered.Store(0)
	g.open = make(chan struct{})
	return g.open
}

// TestOneReplicaPassesAGroup: two controllers (two traffic replicas) on one
// store, passing at the same moment, round after round: the group's run
// is passed by one of them, while the other leaves it alone; never both.
func TestOneReplicaPassesAGroup(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	g := &gate{}
	a, b := New(st, g.connect, zapNop(), time.Minute), New(st, g.connect, zapNop(), time.Minute)
	require.NotEqual(t, a.Holder, b.Holder)
	allow(t, a, "127.0.0.1:53")
	noBackoff(a, b)
	ctx := context.Background()
	require.NoError(t, a.Set(ctx, "p/lc/g", []Run{validRun()}))

	for round := range 10 {
		open := g.reset()
		done := make(chan error, 2)
		for _, c := range []*Controller{a, b} {
			go func() { done <- c.SyncOnce(ctx) }()
		}
		// One replica holds the group and waits at the cluster; the
		// other finishes its pass without reaching it.
		select {
		case err := <-done:
			require.NoError(t, err, "round %d", round)
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: neither replica finished its pass while the other was at the cluster: both passed the group", round)
		}
		require.Eventually(t, func() bool { return g.entered.Load() == 1 }, 10*time.Second, 5*time.Millisecond, "round %d", round)
		close(open)
		require.NoError(t, <-done, "round %d", round)
		require.Equal(t, int64(1), g.entered.Load(), "round %d: one pass over the group", round)
		require.False(t, g.overlap.Load(), "round %d: two passes at once", round)
	}
	leases, err := store.NewLeases(st, LeaseCollection).List(ctx)
	require.NoError(t, err)
	require.Empty(t, leases, "every pass released its lease")
	s, err := a.Status(ctx, "p/lc/g")
	require.NoError(t, err)
	require.Equal(t, "cluster edge/c1 could not be reached", s[0].GetLastError(), "the pass's failure is in the status")
}

// TestDeadReplicasGroupIsTakenOver: a group whose lease a dead replica left
// is passed by another once the lease expired.
func TestDeadReplicasGroupIsTakenOver(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	g := &gate{}
	close(g.reset())
	c := New(st, g.connect, zapNop(), time.Minute)
	allow(t, c, "127.0.0.1:53")
	ctx := context.Background()
	require.NoError(t, c.Set(ctx, "p/lc/g", []Run{validRun()}))
	_, err := store.NewLeases(st, LeaseCollection).Acquire(ctx, "dns/p/lc/g", "traffic@dead-host/1/1", time.Second)
	require.NoError(t, err)

	require.NoError(t, c.SyncOnce(ctx))
	require.Zero(t, g.entered.Load(), "the dead replica's lease is live")
	require.Eventually(t, func() bool {
		require.NoError(t, c.SyncOnce(ctx))
		return g.entered.Load() == 1
	}, 20*time.Second, 100*time.Millisecond)
}
