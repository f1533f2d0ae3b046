package engine

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// Gauges: how much of this replica's work is outstanding, computed at
// scrape time from the engine's state under mu (the source of truth), so
// they cannot drift the way counted increments and decrements can.

var (
	unsettledOpts = prometheus.GaugeOpts{
		Name: "dcm_rsync_unsettled_rollouts",
		Help: "Rollouts with a cluster this replica works whose status is not settled (pending or retrying at the rollout's generation; stopped rollouts are settled).",
	}
	inRetryOpts = prometheus.GaugeOpts{
		Name: "dcm_rsync_clusters_in_retry",
		Help: "Clusters this replica works on which a rollout's next step waits for a retry after a failure.",
	}
	// running are the engines between load and stop; the process's gauges
	// add theirs up (one in a deployed program: a process is one replica).
	running = struct {
		sync.Mutex
		engines map[*Engine]struct{}
	}{engines: map[*Engine]struct{}{}}
	_ = promauto.NewGaugeFunc(unsettledOpts, func() float64 { return sumRunning(func(b backlog) int { return b.unsettled }) })
	_ = promauto.NewGaugeFunc(inRetryOpts, func() float64 { return sumRunning(func(b backlog) int { return b.inRetry }) })
)

func sumRunning(f func(backlog) int) float64 {
	running.Lock()
	defer running.Unlock()
	n := 0
	for e := range running.engines {
		n += f(e.backlog())
	}
	return float64(n)
}

// gauges registers e's state with the process's gauges until the
// returned function is called.
func (e *Engine) gauges() (stop func()) {
	running.Lock()
	running.engines[e] = struct{}{}
	running.Unlock()
	return func() {
		running.Lock()
		delete(running.engines, e)
		running.Unlock()
	}
}

// backlog is the work outstanding on this replica's clusters.
type backlog struct {
	// unsettled: rollouts with a task on a cluster of a held shard whose
	// next step is still to do (pending or retrying), the rollout not stopped.
	unsettled int
	// inRetry: clusters of held shards where such a next step is a retry.
	inRetry int
}

// backlog reads e's backlog under mu: a task's next step is what its
// status shows as not settled (api.go status: a resource not done is
// pending or retrying), and RETRYING when it waits for a retry.
func (e *Engine) backlog() backlog {
	e.board.mu.Lock()
	defer e.board.mu.Unlock()
	owners := map[*owner]struct{}{}
	var b backlog
	for _, w := range e.board.workers {
		if e.shards.active(w.shard) == nil {
			continue // another replica's
		}
		retry := false
		for _, t := range w.tasks {
			o := t.owner
			if o.rec.GetStopped() {
				continue
			}
			i := t.nextStep(o.rec.GetGeneration())
			if i < 0 {
				continue
			}
			owners[o] = struct{}{}
			if t.state.GetResources()[i].GetState() == rsyncv1.State_STATE_RETRYING {
				retry = true
			}
		}
		if retry {
			b.inRetry++
		}
	}
	b.unsettled = len(owners)
	return b
}
