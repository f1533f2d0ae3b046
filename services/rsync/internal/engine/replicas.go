package engine

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Replicas share one store (shards.go splits the clusters). Each keeps
// every rollout's desired state: the API's changes are written to the
// rollouts collection by whichever replica serves them, and the others
// learn them by polling the records' versions (the embedded store has no
// change streams) and before each change they serve. A cluster's state is
// written only by the replica holding its shard; the others read it from
// the store when asked for status.

// pollLoop adopts the rollout changes other replicas stored, every
// Config.Poll, until ctx ends.
func (e *Engine) pollLoop(ctx context.Context) {
	tick := time.NewTicker(e.cfg.Poll)
	defer tick.Stop()
	every := max(1, int(min(e.cfg.PurgeAfter/6, 10*time.Second)/e.cfg.Poll))
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := e.poll(ctx, n%30 == 0); err != nil && ctx.Err() == nil {
			e.log.Warn("poll rollouts", zap.Error(err))
		}
		if n%every == 0 {
			e.sweep(ctx)
		}
	}
}

// poll adopts every rollout whose stamped version differs from the one in
// memory. With full, it reads the records' own versions instead (a
// safety net for a stamp that was not written) and drops the rollouts
// another replica purged.
func (e *Engine) poll(ctx context.Context, full bool) error {
	var vers map[string]int64
	var err error
	if full {
		vers, err = e.rollouts.Versions(ctx)
	} else {
		vers, err = e.stamps.All(ctx)
	}
	if err != nil {
		return err
	}
	var stale []string
	e.mu.Lock()
	for id, v := range vers {
		if o := e.owners[id]; o == nil || o.version != v {
			stale = append(stale, id)
		}
	}
	if full {
		for id, o := range e.owners {
			if _, ok := vers[id]; !ok && o.version > 0 {
				stale = append(stale, id) // purged by another replica (refresh drops it)
			}
		}
	}
	e.mu.Unlock()
	for _, id := range stale {
		e.apiMu.Lock()
		err := e.refresh(ctx, id)
		e.apiMu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// refresh reads ownerID's stored rollout and adopts it if it is newer
// than the one in memory. Called with apiMu held.
func (e *Engine) refresh(ctx context.Context, ownerID string) error {
	it, err := e.rollouts.Get(ctx, ownerID)
	if errs.Code(err) == codes.NotFound {
		e.mu.Lock()
		if o := e.owners[ownerID]; o != nil {
			e.drop(o) // purged
		}
		e.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	e.mu.Lock()
	o := e.owners[ownerID]
	if o != nil && it.Version < o.version {
		// Purged and submitted anew (versions start again at 1).
		e.drop(o)
		o = nil
	}
	fresh := o == nil || o.version != it.Version
	e.mu.Unlock()
	if !fresh {
		return nil
	}
	next, err := e.newOwner(ctx, it.Msg, it.Version)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if o == nil {
		e.owners[ownerID] = next
		o = next
	} else {
		o.rec, o.objs, o.version = next.rec, next.objs, next.version
	}
	e.adopted(o)
	return nil
}

// adopted makes o's new record current: a stop cancels its passes,
// anything else is reconciled and its workers kicked. Called with mu held.
func (e *Engine) adopted(o *owner) {
	if o.rec.GetStopped() {
		for _, t := range o.tasks {
			if t.cancel != nil {
				t.cancel()
			}
		}
	} else {
		e.reconcile(o)
		e.kickAll(o)
	}
	o.notify()
}

// activate starts the work on newly held shards: it adopts the rollouts
// others changed, reads the saved state of the shards' clusters (the
// previous holder's last save: work done after it is redone, which
// server-side apply makes harmless) and resumes like a restart does.
func (e *Engine) activate(ctx context.Context, got []store.Lease) {
	if err := e.poll(ctx, true); err != nil {
		e.log.Warn("take over shards: poll rollouts; will retry", zap.Error(err))
		return
	}
	all, err := e.states.All(ctx)
	if err != nil {
		e.log.Warn("take over shards: read cluster states; will retry", zap.Error(err))
		return
	}
	saved, stale := newest(all)
	e.dropStale(ctx, stale)
	want := map[int]int64{}
	for _, l := range got {
		if i, ok := parseShard(l.Name, e.shards.n); ok {
			want[i] = l.Epoch
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	mine := func(provider, cluster string) bool {
		_, ok := want[shardOf(clusterKey(provider, cluster), e.shards.n)]
		return ok
	}
	touched := map[*owner]bool{}
	var legacy []*task
	for _, s := range saved {
		st := s.msg
		o := e.owners[st.GetOwner()]
		if o == nil || !mine(st.GetProvider(), st.GetCluster()) {
			continue
		}
		t := e.addTask(o, st.GetProvider(), st.GetCluster())
		if e.install(t, s) {
			legacy = append(legacy, t)
		}
		touched[o] = true
	}
	for o := range touched {
		e.reconcileWhere(o, mine)
		for _, t := range o.tasks {
			if mine(t.provider, t.cluster) {
				t.resume()
			}
		}
	}
	restampAll(legacy)
	for i, epoch := range want {
		sctx, cancel := context.WithCancel(e.ctx)
		e.shards.held[i] = &shardLease{epoch: epoch, ctx: sctx, cancel: cancel}
	}
	heldShards.Set(float64(len(e.shards.held)))
	e.indexClaims()
	for key, w := range e.workers {
		if _, ok := want[w.shard]; ok {
			provider, cluster, _ := strings.Cut(key, "/")
			e.startDrift(e.shards.held[w.shard].ctx, provider, cluster)
			select {
			case e.workers[key].kick <- struct{}{}:
			default:
			}
		}
	}
	e.log.Info("took shards", zap.Int("shards", len(want)), zap.Int("held", len(e.shards.held)))
}

// install sets t's state as loaded from the store. A state stored before
// rsync stamped owners gets its owned flags (adoptLegacy), and install
// reports it. Called with mu held.
func (e *Engine) install(t *task, saved savedState) bool {
	st := saved.msg
	t.state, t.stateVersion, t.stateID = st, saved.seq, saved.id
	if st.GetOwnershipRecorded() {
		return false
	}
	adoptLegacy(t.state)
	return true
}

// restampAll has the objects of legacy states applied again, so that they
// are stamped with their owner; a stopped rollout's are stamped when it
// resumes. Called with mu held, after resume.
func restampAll(legacy []*task) {
	for _, t := range legacy {
		if !t.owner.rec.GetStopped() {
			restamp(t.state)
		}
		t.next, t.dirty = time.Time{}, true
	}
}

// resume schedules t after its state was loaded: retries when they were
// due, the rest now. Called with mu held.
func (t *task) resume() {
	t.next = time.Time{}
	for _, r := range t.state.GetResources() {
		if r.GetState() == rsyncv1.State_STATE_RETRYING && r.GetNextRetry().AsTime().After(t.next) {
			t.next = r.GetNextRetry().AsTime()
		}
	}
	t.dirty = false
}

// epochOf is the epoch of the lease under which t's state may be written;
// false when this replica does not hold t's shard. Called with mu held.
func (e *Engine) epochOf(t *task) (int64, bool) {
	sl := e.active(shardOf(clusterKey(t.provider, t.cluster), e.shards.n))
	if sl == nil {
		return 0, false
	}
	return sl.epoch, true
}

// refreshForeign reads the saved states of ownerID's clusters that other
// replicas work on, at most every half second: what Status and Watch show
// of them is their holder's last save (at most Config.Checkpoint old).
func (e *Engine) refreshForeign(ctx context.Context, ownerID string) error {
	e.mu.Lock()
	o := e.owners[ownerID]
	need := false
	if o != nil && time.Since(o.refreshed) >= 500*time.Millisecond {
		for _, t := range o.tasks {
			if _, ok := e.epochOf(t); !ok {
				need = true
				break
			}
		}
	}
	e.mu.Unlock()
	if !need {
		return nil
	}
	items, err := e.states.Children(ctx, ownerID)
	if err != nil {
		return err
	}
	saved, _ := newest(items)
	e.mu.Lock()
	defer e.mu.Unlock()
	foreign := func(provider, cluster string) bool {
		return e.active(shardOf(clusterKey(provider, cluster), e.shards.n)) == nil
	}
	var legacy []*task
	for _, s := range saved {
		st := s.msg
		if !foreign(st.GetProvider(), st.GetCluster()) {
			continue
		}
		t := e.addTask(o, st.GetProvider(), st.GetCluster())
		if e.install(t, s) {
			legacy = append(legacy, t)
		}
	}
	e.reconcileWhere(o, foreign) // the current generation's view of them
	restampAll(legacy)           // as their holder sees them
	o.refreshed = time.Now()
	return nil
}

// hasForeign says whether another replica works on some of ownerID's
// clusters.
func (e *Engine) hasForeign(ownerID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if o := e.owners[ownerID]; o != nil {
		for _, t := range o.tasks {
			if _, ok := e.epochOf(t); !ok {
				return true
			}
		}
	}
	return false
}
