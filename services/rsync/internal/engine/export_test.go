package engine

import (
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// ShardOf is shardOf, for tests that find which replica works a cluster.
func ShardOf(provider, cluster string, n int) int { return shardOf(clusterKey(provider, cluster), n) }

// Gauges are this engine's own dcm_rsync_unsettled_rollouts and
// dcm_rsync_clusters_in_retry (the process's add up every running
// engine's, and tests run several at once).
func (e *Engine) Gauges() (unsettled, inRetry prometheus.Collector) {
	return prometheus.NewGaugeFunc(unsettledOpts, func() float64 { return float64(e.backlog().unsettled) }),
		prometheus.NewGaugeFunc(inRetryOpts, func() float64 { return float64(e.backlog().inRetry) })
}

// HoldSaves holds the engine's writes of cluster states until release is
// called, or the test ends (before the engine stops, as it saves what is
// left): a test sees what the engine answers before they are saved.
func (e *Engine) HoldSaves(t testing.TB) (release func()) {
	e.saver.gate.Lock()
	release = sync.OnceFunc(e.saver.gate.Unlock)
	t.Cleanup(release)
	return release
}
