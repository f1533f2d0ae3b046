package engine

import (
	"context"
	"fmt"
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

// replicas keeps this replica's rollouts in step with the store: it
// loads them at start, adopts the changes other replicas stored (polls,
// and before each change and answer of the API), takes over the clusters
// of newly held shards (activate), reads the states of the clusters other
// replicas work on and purges settled deletions (purge.go).
type replicas struct {
	*board
	rollouts *store.Records[*rsyncv1.StoredRollout]
	states   *store.Records[*rsyncv1.StoredClusterState]
	stamps   *store.Stamps
	shards   *shards
	applier  *applier
	drift    *driftWatcher
	saver    *statusWriter
	// pollEvery is Config.Poll; purgeAfter is Config.PurgeAfter.
	pollEvery, purgeAfter time.Duration
}

// load reads every rollout and cluster state and starts the workers.
func (rp *replicas) load(ctx context.Context) error {
	var recs []store.Item[*rsyncv1.StoredRollout]
	err := retryStore(ctx, func() (err error) {
		recs, err = rp.rollouts.Children(ctx, "")
		return err
	})
	if err != nil {
		return err
	}
	all, err := rp.states.All(ctx)
	if err != nil {
		return err
	}
	saved, stale := newest(all)
	rp.dropStale(ctx, stale)
	byOwner := map[string][]savedState{}
	for _, s := range saved {
		byOwner[s.msg.GetOwner()] = append(byOwner[s.msg.GetOwner()], s)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.ctx = ctx
	for _, it := range recs {
		rec := it.Msg
		o, err := rp.newOwner(ctx, rec, it.Version)
		if err != nil {
			return err
		}
		var legacy []*task
		for _, st := range byOwner[rec.GetOwner()] {
			t := rp.applier.addTask(o, st.msg.GetProvider(), st.msg.GetCluster())
			if rp.install(t, st) {
				legacy = append(legacy, t)
			}
		}
		rp.owners[rec.GetOwner()] = o
		rp.applier.reconcile(o)
		for _, t := range o.tasks {
			t.resume()
		}
		restampAll(legacy)
	}
	rp.indexClaims()
	for _, o := range rp.owners {
		rp.applier.kickAll(o)
	}
	close(rp.loaded)
	rp.log.Info("rsync engine started", zap.Int("rollouts", len(rp.owners)), zap.Int("clusters", len(rp.workers)))
	return nil
}

// newOwner makes the owner of a stored rollout, opening its sealed
// manifests.
func (rp *replicas) newOwner(ctx context.Context, rec *rsyncv1.StoredRollout, version int64) (*owner, error) {
	o := &owner{rec: rec, version: version, tasks: map[string]*task{}, changed: make(chan struct{})}
	manifests, sensitive, err := rp.openManifests(ctx, rec)
	if err != nil {
		return nil, err
	}
	for i, m := range manifests {
		obj, err := parseResource(fmt.Sprintf("manifests[%d]", i), m, sensitive[i])
		if err != nil {
			return nil, fmt.Errorf("stored rollout %q: %w", rec.GetOwner(), err)
		}
		o.objs = append(o.objs, obj)
	}
	return o, nil
}

// pollLoop adopts the rollout changes other replicas stored, every
// Config.Poll, until ctx ends.
func (rp *replicas) pollLoop(ctx context.Context) {
	tick := time.NewTicker(rp.pollEvery)
	defer tick.Stop()
	every := max(1, int(min(rp.purgeAfter/6, 10*time.Second)/rp.pollEvery))
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := rp.poll(ctx, n%30 == 0); err != nil && ctx.Err() == nil {
			rp.log.Warn("poll rollouts", zap.Error(err))
		}
		if n%every == 0 {
			rp.sweep(ctx)
		}
	}
}

// poll adopts every rollout whose stamped version differs from the one in
// memory. With full, it reads the records' own versions instead (a
// safety net for a stamp that was not written) and drops the rollouts
// another replica purged.
func (rp *replicas) poll(ctx context.Context, full bool) error {
	var vers map[string]int64
	var err error
	if full {
		vers, err = rp.rollouts.Versions(ctx)
	} else {
		vers, err = rp.stamps.All(ctx)
	}
	if err != nil {
		return err
	}
	var stale []string
	rp.mu.Lock()
	for id, v := range vers {
		if o := rp.owners[id]; o == nil || o.version != v {
			stale = append(stale, id)
		}
	}
	if full {
		for id, o := range rp.owners {
			if _, ok := vers[id]; !ok && o.version > 0 {
				stale = append(stale, id) // purged by another replica (refresh drops it)
			}
		}
	}
	rp.mu.Unlock()
	for _, id := range stale {
		rp.apiMu.Lock()
		err := rp.refresh(ctx, id)
		rp.apiMu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// refresh reads ownerID's stored rollout and adopts it if it is newer
// than the one in memory. Called with apiMu held.
func (rp *replicas) refresh(ctx context.Context, ownerID string) error {
	it, err := rp.rollouts.Get(ctx, ownerID)
	if errs.Code(err) == codes.NotFound {
		rp.mu.Lock()
		if o := rp.owners[ownerID]; o != nil {
			rp.drop(o) // purged
		}
		rp.mu.Unlock()
		return nil
	}
	if err != nil {
		return err
	}
	rp.mu.Lock()
	o := rp.owners[ownerID]
	if o != nil && it.Version < o.version {
		// Purged and submitted anew (versions start again at 1).
		rp.drop(o)
		o = nil
	}
	fresh := o == nil || o.version != it.Version
	rp.mu.Unlock()
	if !fresh {
		return nil
	}
	next, err := rp.newOwner(ctx, it.Msg, it.Version)
	if err != nil {
		return err
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if o == nil {
		rp.owners[ownerID] = next
		o = next
	} else {
		o.rec, o.objs, o.version = next.rec, next.objs, next.version
	}
	rp.adopted(o)
	return nil
}

// adopted makes o's new record current: a stop cancels its passes,
// anything else is reconciled and its workers kicked. Called with mu held.
func (rp *replicas) adopted(o *owner) {
	if o.rec.GetStopped() {
		for _, t := range o.tasks {
			if t.cancel != nil {
				t.cancel()
			}
		}
	} else {
		rp.applier.reconcile(o)
		rp.applier.kickAll(o)
	}
	o.notify()
}

// activate starts the work on newly held shards: it adopts the rollouts
// others changed, reads the saved state of the shards' clusters (the
// previous holder's last save: work done after it is redone, which
// server-side apply makes harmless) and resumes like a restart does.
func (rp *replicas) activate(ctx context.Context, got []store.Lease) {
	if err := rp.poll(ctx, true); err != nil {
		rp.log.Warn("take over shards: poll rollouts; will retry", zap.Error(err))
		return
	}
	all, err := rp.states.All(ctx)
	if err != nil {
		rp.log.Warn("take over shards: read cluster states; will retry", zap.Error(err))
		return
	}
	saved, stale := newest(all)
	rp.dropStale(ctx, stale)
	want := map[int]int64{}
	for _, l := range got {
		if i, ok := parseShard(l.Name, rp.shards.n); ok {
			want[i] = l.Epoch
		}
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	mine := func(provider, cluster string) bool {
		_, ok := want[shardOf(clusterKey(provider, cluster), rp.shards.n)]
		return ok
	}
	touched := map[*owner]bool{}
	var legacy []*task
	for _, s := range saved {
		st := s.msg
		o := rp.owners[st.GetOwner()]
		if o == nil || !mine(st.GetProvider(), st.GetCluster()) {
			continue
		}
		t := rp.applier.addTask(o, st.GetProvider(), st.GetCluster())
		if rp.install(t, s) {
			legacy = append(legacy, t)
		}
		touched[o] = true
	}
	for o := range touched {
		rp.applier.reconcileWhere(o, mine)
		for _, t := range o.tasks {
			if mine(t.provider, t.cluster) {
				t.resume()
			}
		}
	}
	restampAll(legacy)
	for i, epoch := range want {
		sctx, cancel := context.WithCancel(rp.ctx)
		rp.shards.held[i] = &shardLease{epoch: epoch, ctx: sctx, cancel: cancel}
	}
	heldShards.Set(float64(len(rp.shards.held)))
	rp.indexClaims()
	for key, w := range rp.workers {
		if _, ok := want[w.shard]; ok {
			provider, cluster, _ := strings.Cut(key, "/")
			rp.drift.start(rp.shards.held[w.shard].ctx, provider, cluster)
			select {
			case rp.workers[key].kick <- struct{}{}:
			default:
			}
		}
	}
	rp.log.Info("took shards", zap.Int("shards", len(want)), zap.Int("held", len(rp.shards.held)))
}

// install sets t's state as loaded from the store. A state stored before
// rsync stamped owners gets its owned flags (adoptLegacy), and install
// reports it. Called with mu held.
func (rp *replicas) install(t *task, saved savedState) bool {
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

// refreshForeign reads the saved states of ownerID's clusters that other
// replicas work on, at most every half second unless fresh: what Status
// and Watch show of them is their holder's last save (at most
// Config.Checkpoint old while under way; a holder reports its own
// clusters settled only once saved, api.report).
func (rp *replicas) refreshForeign(ctx context.Context, ownerID string, fresh bool) error {
	rp.mu.Lock()
	o := rp.owners[ownerID]
	need := false
	if o != nil && (fresh || time.Since(o.refreshed) >= 500*time.Millisecond) {
		for _, t := range o.tasks {
			if _, ok := rp.shards.epochOf(t); !ok {
				need = true
				break
			}
		}
	}
	rp.mu.Unlock()
	if !need {
		return nil
	}
	items, err := rp.states.Children(ctx, ownerID)
	if err != nil {
		return err
	}
	saved, _ := newest(items)
	rp.mu.Lock()
	defer rp.mu.Unlock()
	foreign := func(provider, cluster string) bool {
		return rp.shards.active(shardOf(clusterKey(provider, cluster), rp.shards.n)) == nil
	}
	var legacy []*task
	for _, s := range saved {
		st := s.msg
		if !foreign(st.GetProvider(), st.GetCluster()) {
			continue
		}
		t := rp.applier.addTask(o, st.GetProvider(), st.GetCluster())
		if rp.install(t, s) {
			legacy = append(legacy, t)
		}
	}
	rp.applier.reconcileWhere(o, foreign) // the current generation's view of them
	restampAll(legacy)                    // as their holder sees them
	o.refreshed = time.Now()
	return nil
}

// hasForeign says whether another replica works on some of ownerID's
// clusters.
func (rp *replicas) hasForeign(ownerID string) bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if o := rp.owners[ownerID]; o != nil {
		for _, t := range o.tasks {
			if _, ok := rp.shards.epochOf(t); !ok {
				return true
			}
		}
	}
	return false
}
