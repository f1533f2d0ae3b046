package engine

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// Purge: a rollout whose deletion settled with every resource deleted is
// removed from the store (its record and its cluster states) once it has
// stayed so for Config.PurgeAfter, so that the store holds the rollouts
// that exist, not every one that ever did. Its owner then reads "not
// found", which core takes as terminated. A deletion that left orphans
// (orphans.go) is kept: its status lists what may remain. One replica
// purges at a time (the holder of shard 0); the record's deletion is
// conditional on its version, so a rollout submitted again meanwhile is
// not lost. Other replicas drop a purged rollout at their next poll.

var purged = promauto.NewCounter(prometheus.CounterOpts{
	Name: "dcm_rsync_rollouts_purged_total",
	Help: "Rollouts removed from the store after their deletion settled with every resource deleted.",
})

// sweep purges what is due, if this replica holds shard 0.
func (rp *replicas) sweep(ctx context.Context) {
	rp.mu.Lock()
	if rp.shards.active(0) == nil {
		rp.mu.Unlock()
		return
	}
	var ids []string
	for id, o := range rp.owners {
		if o.rec.GetDeleting() && !o.rec.GetStopped() {
			ids = append(ids, id)
		}
	}
	rp.mu.Unlock()
	slices.Sort(ids)
	for _, id := range ids {
		if err := rp.refreshForeign(ctx, id, false); err != nil {
			return
		}
		rp.mu.Lock()
		o := rp.owners[id]
		due := false
		if o != nil {
			st := o.summary()
			switch {
			case !st.GetSettled() || st.GetState() != rsyncv1.State_STATE_DELETED || !rp.saver.saved(o):
				o.deletedAt = time.Time{}
			case o.deletedAt.IsZero():
				o.deletedAt = time.Now()
			default:
				due = time.Since(o.deletedAt) >= rp.purgeAfter
			}
		}
		var version int64
		if due {
			version = o.version
		}
		rp.mu.Unlock()
		if due {
			rp.purge(ctx, id, version)
		}
	}
}

// purge removes a settled deletion's record (if still at version) and its
// cluster states.
func (rp *replicas) purge(ctx context.Context, id string, version int64) {
	rp.apiMu.Lock()
	defer rp.apiMu.Unlock()
	if err := rp.rollouts.DeleteVersion(ctx, id, version); err != nil {
		rp.log.Debug("purge rollout: not now", zap.String("owner", id), zap.Error(err))
		return
	}
	if err := rp.stamps.Delete(ctx, id); err != nil {
		rp.log.Debug("purge rollout: its stamp stays", zap.String("owner", id), zap.Error(err))
	}
	if _, err := rp.states.DeleteUnder(ctx, id); err != nil {
		rp.log.Warn("purge rollout: its cluster states stay until the next start", zap.String("owner", id), zap.Error(err))
	}
	purged.Inc()
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if o := rp.owners[id]; o != nil && o.version == version {
		rp.drop(o)
	}
	rp.log.Info("purged a deleted rollout", zap.String("owner", id))
}

// drop forgets an owner whose record is gone from the store: its tasks
// leave their workers. Called with mu held.
func (rp *replicas) drop(o *owner) {
	for key, t := range o.tasks {
		if t.cancel != nil {
			t.cancel()
		}
		if w := rp.workers[key]; w != nil {
			w.tasks = slices.DeleteFunc(w.tasks, func(x *task) bool { return x == t })
			w.turn = 0
		}
		rp.saver.forget(t)
	}
	delete(rp.owners, o.rec.GetOwner())
	rp.indexClaims()
	o.notify()
}
