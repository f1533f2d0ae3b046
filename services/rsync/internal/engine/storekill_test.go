package engine_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storeserver"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// countingCluster is a simulated cluster that counts the applies of each
// object: what an apply lost (0) or repeated (2 or more) would show.
type countingCluster struct {
	*engine.Simulated
	mu      sync.Mutex
	applies map[string]int
}

// Apply implements engine.Cluster.
func (c *countingCluster) Apply(ctx context.Context, obj *unstructured.Unstructured, manager string, force bool) (*unstructured.Unstructured, error) {
	out, err := c.Simulated.Apply(ctx, obj, manager, force)
	if err == nil {
		c.mu.Lock()
		c.applies[obj.GetKind()+" "+obj.GetNamespace()+"/"+obj.GetName()]++
		c.mu.Unlock()
	}
	return out, err
}

// counts is how many objects were applied once, and a description of
// those applied more than once.
func (c *countingCluster) counts() (once int, repeated []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, n := range c.applies {
		if n == 1 {
			once++
		} else {
			repeated = append(repeated, fmt.Sprintf("%s: %d applies", k, n))
		}
	}
	return once, repeated
}

func (c *countingCluster) applied() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.applies)
}

// TestStoreServerKilledMidApplySettled: the resource synchronizer's
// engine, on the store server as rsync's own user, applies a rollout to
// three simulated clusters; mid-apply the store server goes down, once
// PostgreSQL killed (SIGKILL: it recovers from its log at the restart),
// once FerretDB stopped (every connection closed), and comes back after
// the engine's state writes failed. Each time the rollout settles with
// every object applied, and stored as applied: none lost. And each object
// was applied exactly once: none repeated (the engine keeps its state in
// memory and writes it once the store answers again, within its shard
// leases' time to live).
func TestStoreServerKilledMidApplySettled(t *testing.T) {
	srv := storetest.Server(t, storeserver.Users)
	uri, err := os.ReadFile(srv.URIFile(storeserver.Role("rsync")))
	require.NoError(t, err)
	log, _ := zap.NewDevelopment(zap.IncreaseLevel(zap.ErrorLevel))
	st, err := store.Open(store.Config{URI: strings.TrimSpace(string(uri)), Database: "dcm", Keyring: storetest.Keyring(t)}, log)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close(context.Background()) })

	const clusters, n = 3, 150
	sims := engine.Clusters[*countingCluster]{}
	var all []*countingCluster
	for i := range clusters {
		c := &countingCluster{Simulated: &engine.Simulated{Latency: 20 * time.Millisecond}, applies: map[string]int{}}
		sims[fmt.Sprintf("sim/c%d", i)] = c
		all = append(all, c)
	}
	// Shard leases that outlast the outage: a replica whose renewals fail
	// for 6/10 of its leases' time to live stops working on its shards (another
	// may take them over) and, taking them back, redoes what it had not
	// stored; this test is about an outage shorter than that (with the
	// default 8 s it is 4.8 s, less than stopping FerretDB and the
	// driver's 3 s server selection: docs/store.md, "The store server
	// down mid-apply").
	cfg := testConfig
	cfg.LeaseTTL = 30 * time.Second
	e := runReplica(t, st, sims, "", cfg)
	applied := func() (sum int) {
		for _, c := range all {
			sum += c.applied()
		}
		return sum
	}

	for _, outage := range []struct {
		name       string
		down       func()
		up         func() error
		manifestNS string
	}{
		{"postgres killed", func() { srv.StopPostgres(true) }, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			return srv.StartPostgres(ctx)
		}, "tenant-pgkill"},
		{"ferretdb stopped", srv.StopFerretDB, srv.StartFerretDB, "tenant-fdbstop"},
	} {
		t.Run(outage.name, func(t *testing.T) {
			owner := "lc/p/" + outage.manifestNS
			set := configMaps(outage.manifestNS, n)
			total := clusters * len(set)
			base := applied()
			var rollout []*rsyncv1.ClusterResources
			for i := range clusters {
				cr := &rsyncv1.ClusterResources{Provider: "sim", Cluster: fmt.Sprintf("c%d", i)}
				for _, m := range set {
					cr.Resources = append(cr.Resources, &rsyncv1.Resource{Manifest: m})
				}
				rollout = append(rollout, cr)
			}
			_, err := e.Submit(context.Background(), owner, rollout)
			require.NoError(t, err)

			// Mid-apply: some progress stored, not all of it.
			deadline := time.Now().Add(time.Minute)
			var stored int
			for {
				stored, _ = storedApplied(t, st, owner)
				if stored > 0 {
					break
				}
				require.True(t, time.Now().Before(deadline), "no progress stored in a minute")
				time.Sleep(20 * time.Millisecond)
			}
			require.Less(t, stored, total, "the store went down mid-apply")
			errorsBefore := counterValue(t, "dcm_rsync_store_writes_total", map[string]string{"result": "error"})
			start := time.Now()
			outage.down()
			t.Logf("%s in %v with %d of %d objects stored as applied, %d applied", outage.name, time.Since(start).Round(time.Millisecond), stored, total, applied()-base)

			// Down until the engine's state writes have failed.
			deadline = time.Now().Add(time.Minute)
			for counterValue(t, "dcm_rsync_store_writes_total", map[string]string{"result": "error"}) == errorsBefore {
				require.True(t, time.Now().Before(deadline), "no state write failed in a minute of outage")
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("state writes failed; %d of %d objects applied during the outage", applied()-base, total)
			require.NoError(t, outage.up())

			deadline = time.Now().Add(2 * time.Minute)
			for {
				done, all, err := storedAppliedIn(st, owner)
				if err == nil && done == total && all == total {
					break
				}
				require.True(t, time.Now().Before(deadline),
					"not all stored as applied 2 minutes after the store came back (%d of %d; last error %v)", done, all, err)
				time.Sleep(100 * time.Millisecond)
			}
			waitFor(t, e, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
			require.Equal(t, total, applied()-base, "every object applied: none lost")
		})
	}
	var once int
	var repeated []string
	for _, c := range all {
		o, r := c.counts()
		once += o
		repeated = append(repeated, r...)
	}
	require.Empty(t, repeated, "no apply repeated")
	require.Equal(t, 2*clusters*(n+1), once)
}
