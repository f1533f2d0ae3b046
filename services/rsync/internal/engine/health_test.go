package engine_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// probeCounter is a Connector that counts the connections asked of it by
// cluster: with no rollout, every one is a probe's.
type probeCounter struct {
	engine.SimulatedClusters
	mu sync.Mutex
	n  map[string]int
}

func (p *probeCounter) Connect(ctx context.Context, provider, cluster string) (engine.Cluster, error) {
	p.mu.Lock()
	p.n[provider+"/"+cluster]++
	p.mu.Unlock()
	return p.SimulatedClusters.Connect(ctx, provider, cluster)
}

func (p *probeCounter) counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.n)
}

// runHealth runs a prober of e's clusters until the test ends.
func runHealth(t *testing.T, st *store.Store, e *engine.Engine, conn engine.Connector, keys []string, cfg engine.HealthConfig) *engine.Health {
	t.Helper()
	h := engine.NewHealth(engine.HealthRecords(st), e, conn, func(context.Context) ([]string, error) { return keys, nil }, cfg, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return h
}

// gathered is the process's dcm_rsync_clusters by state.
func gathered(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "dcm_rsync_clusters" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestOnlyTheShardHolderProbes runs two replicas over 40 simulated
// clusters: each cluster is probed by the replica that holds its shard
// and by no other, about once an interval (not once per replica); a
// cluster whose every call fails is Unreachable; the records in the store
// and dcm_rsync_clusters say so.
func TestOnlyTheShardHolderProbes(t *testing.T) {
	st := storetest.Open(t)
	sim := engine.SimulatedClusters{}
	var keys []string
	for i := range 40 {
		key := fmt.Sprintf("edge/c%02d", i)
		sim[key] = &engine.Simulated{}
		keys = append(keys, key)
	}
	sim["edge/c07"].FailureRate = 1
	conns := map[string]*probeCounter{"a": {SimulatedClusters: sim, n: map[string]int{}}, "b": {SimulatedClusters: sim, n: map[string]int{}}}
	engines := map[string]*engine.Engine{
		"a": runReplica(t, st, conns["a"], "a", testConfig),
		"b": runReplica(t, st, conns["b"], "b", testConfig),
	}
	waitSplit(t, store.NewLeases(st, engine.LeaseCollection), "a", "b")

	const interval = 200 * time.Millisecond
	cfg := engine.HealthConfig{Interval: interval}
	probers := map[string]*engine.Health{}
	start := time.Now()
	for name, e := range engines {
		probers[name] = runHealth(t, st, e, conns[name], keys, cfg)
	}
	// Until every cluster was probed five times.
	deadline := time.Now().Add(time.Minute)
	for {
		total := map[string]int{}
		for _, c := range conns {
			for k, n := range c.counts() {
				total[k] += n
			}
		}
		if len(total) == len(keys) && slices.Min(slices.Collect(maps.Values(total))) >= 5 {
			break
		}
		require.True(t, time.Now().Before(deadline), "probes so far: %v", total)
		time.Sleep(interval / 4)
	}
	elapsed := time.Since(start)
	most := int(elapsed/(interval*9/10)) + 2 // the first within half an interval, then every 0.9 to 1.1 intervals

	probedBy := map[string][]string{}
	for name, c := range conns {
		// The probers go on: a probe is counted by the connector as it
		// starts and by Probes once it is done, so read Probes first. At
		// most two calls of a cluster (a Ready one asked again) are in
		// flight between the two reads.
		probes := probers[name].Probes.Load()
		counts := c.counts()
		require.NotEmpty(t, counts, "replica %s probed nothing", name)
		for k, n := range counts {
			probedBy[k] = append(probedBy[k], name)
			require.LessOrEqual(t, n, most, "%s probed %s %d times in %s", name, k, n, elapsed)
		}
		require.LessOrEqual(t, probes, int64(sumOf(counts)), "replica %s: every probe it counts was a call", name)
		require.LessOrEqual(t, int64(sumOf(counts)), probes+int64(2*len(counts)), "replica %s: every call but those in flight is a probe it counts", name)
	}
	for _, k := range keys {
		require.Len(t, probedBy[k], 1, "%s probed by %v", k, probedBy[k])
		holder := probedBy[k][0]
		provider, cluster := k[:4], k[5:]
		require.True(t, engines[holder].Holds(provider, cluster), "%s probed by %s, which does not hold it", k, holder)
	}

	// The states: in the store (any replica reads them) and the gauge.
	recs := engine.HealthRecords(st)
	deadline = time.Now().Add(time.Minute)
	for {
		counts := map[string]int{}
		for _, p := range probers {
			for s, n := range p.Counts() {
				counts[s] += n
			}
		}
		if counts[engine.HealthReady] == 39 && counts[engine.HealthUnreachable] == 1 {
			break
		}
		require.True(t, time.Now().Before(deadline), "states: %v", counts)
		time.Sleep(interval / 4)
	}
	g := gathered(t)
	require.EqualValues(t, 39, g[engine.HealthReady], "dcm_rsync_clusters: %v", g)
	require.EqualValues(t, 1, g[engine.HealthUnreachable], "dcm_rsync_clusters: %v", g)
	for _, k := range keys {
		r, err := recs.Get(context.Background(), k)
		require.NoError(t, err, k)
		want := engine.HealthReady
		if k == "edge/c07" {
			want = engine.HealthUnreachable
			require.Contains(t, r.Msg.GetLastError(), "simulated network failure")
			require.Nil(t, r.Msg.GetLastSeen())
		} else {
			require.Equal(t, "v0.0.0-simulated", r.Msg.GetServerVersion())
		}
		require.Equal(t, want, r.Msg.GetState(), k)
	}
	// A steady fleet is not written at every probe: once on its first
	// result (a change from none), then at least half RecordEvery (10 s
	// here) apart.
	var writes int64
	for _, p := range probers {
		writes += p.Writes.Load()
	}
	require.LessOrEqual(t, writes, int64(len(keys)*(1+int(time.Since(start)/(5*time.Second)))), "writes")
}

func sumOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestHealthShown: readers show Unknown for a cluster never probed, when
// probing is off, and when no replica wrote its record for StaleAfter.
func TestHealthShown(t *testing.T) {
	t.Parallel()
	cfg := engine.HealthConfig{Interval: time.Second}
	now := time.Now()
	rec := &rsyncv1.StoredClusterHealth{State: engine.HealthReady, Checked: timestamppb.New(now.Add(-time.Second))}
	require.Equal(t, engine.HealthUnknown, cfg.Shown(nil, now).GetState())
	require.Equal(t, engine.HealthReady, cfg.Shown(rec, now).GetState())
	require.Equal(t, engine.HealthUnknown, engine.HealthConfig{}.Shown(rec, now).GetState(), "probing off")
	stale := cfg.Shown(rec, now.Add(cfg.StaleAfter()+time.Second))
	require.Equal(t, engine.HealthUnknown, stale.GetState())
	require.Contains(t, stale.GetLastError(), "no replica probes")
	require.Equal(t, engine.HealthReady, rec.GetState(), "the record is not changed")
}
