package engine

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// api is what the gRPC service calls (the Engine's exported methods):
// rollouts' changes, stored and then made current, and their status. It
// keeps what it answers up to date with the other replicas' changes
// through replicas.
type api struct {
	*board
	connect  Connector
	rollouts *store.Records[*rsyncv1.StoredRollout]
	stamps   *store.Stamps
	replicas *replicas
	shards   *shards
	saver    *statusWriter
	// writes is the Engine's count of store writes.
	writes *atomic.Int64
}

// build checks and parses a desired state into its stored form: each
// distinct manifest once.
func (a *api) build(ctx context.Context, ownerID string, clusters []*rsyncv1.ClusterResources) (*rsyncv1.StoredRollout, []*object, error) {
	rec := &rsyncv1.StoredRollout{Owner: ownerID}
	var objs []*object
	index := map[string]int32{}
	seen := map[string]bool{}
	for i, c := range clusters {
		field := fmt.Sprintf("clusters[%d]", i)
		key := clusterKey(c.GetProvider(), c.GetCluster())
		if seen[key] {
			return nil, nil, errs.Invalid(field, "cluster %s is given twice", key)
		}
		seen[key] = true
		if err := a.connect.Known(ctx, c.GetProvider(), c.GetCluster()); err != nil {
			if errs.Code(err) == codes.NotFound {
				return nil, nil, errs.Invalid(field, "cluster %s is not registered", key)
			}
			return nil, nil, err
		}
		tg := &rsyncv1.StoredTarget{Provider: c.GetProvider(), Cluster: c.GetCluster()}
		keys := map[string]bool{}
		for j, r := range c.GetResources() {
			m := r.GetManifest()
			at, ok := index[m]
			if !ok {
				mfield := fmt.Sprintf("%s.resources[%d].manifest", field, j)
				obj, err := parseResource(mfield, m, r.GetSensitive())
				if err != nil {
					return nil, nil, err
				}
				if _, ok := obj.u.GetAnnotations()[OwnerAnnotation]; ok {
					return nil, nil, errs.Invalid(mfield, "sets the annotation %s, which rsync sets to the rollout's owner", OwnerAnnotation)
				}
				at = int32(len(objs))
				index[m] = at
				objs = append(objs, obj)
				rec.Manifests = append(rec.Manifests, m)
			}
			if r.GetSensitive() && !objs[at].sensitive {
				objs[at].sensitive, objs[at].text = true, m // also given plain elsewhere: sealed all the same
			}
			if keys[objs[at].key] {
				return nil, nil, errs.Invalid(fmt.Sprintf("%s.resources[%d].manifest", field, j),
					"%s is given twice for this cluster", describe(objs[at].u.GetAPIVersion(), objs[at].u.GetKind(), objs[at].u.GetNamespace(), objs[at].u.GetName()))
			}
			keys[objs[at].key] = true
			tg.Manifests = append(tg.Manifests, at)
		}
		rec.Targets = append(rec.Targets, tg)
	}
	for i, obj := range objs {
		if obj.sensitive {
			rec.Manifests[i] = obj.hash // the manifest itself is sealed (sealedManifests)
			rec.Sealed = append(rec.Sealed, int32(i))
		}
	}
	return rec, objs, nil
}

// waitLoaded waits until Run has loaded the stored state.
func (a *api) waitLoaded(ctx context.Context) error {
	select {
	case <-a.loaded:
		return nil
	case <-ctx.Done():
		return errs.Unavailable(ctx.Err(), "the resource synchronizer is still starting")
	}
}

// Submit stores ownerID's first desired state (or a new one after its
// rollout was deleted) and starts applying it.
func (a *api) Submit(ctx context.Context, ownerID string, clusters []*rsyncv1.ClusterResources) (int64, error) {
	return a.SubmitGuest(ctx, ownerID, "", nil, clusters)
}

// SubmitGuest is Submit for a rollout whose namespaced objects may also
// go in the Namespaces of host (another owner): a traffic intent group's
// in its logical cloud's namespace. repair false: drift on the clusters is
// reported, not repaired (nil: repaired).
func (a *api) SubmitGuest(ctx context.Context, ownerID, host string, repair *bool, clusters []*rsyncv1.ClusterResources) (int64, error) {
	return a.SubmitStaged(ctx, ownerID, host, repair, nil, clusters) // stages.go
}

// buildGuest is build with the rollout's host owner and drift setting.
func (a *api) buildGuest(ctx context.Context, ownerID, host string, reportDriftOnly bool, clusters []*rsyncv1.ClusterResources) (*rsyncv1.StoredRollout, []*object, error) {
	rec, objs, err := a.build(ctx, ownerID, clusters)
	if err != nil {
		return nil, nil, err
	}
	rec.HostOwner, rec.ReportDriftOnly = host, reportDriftOnly
	return rec, objs, nil
}

// Update replaces ownerID's desired state: changes are applied, what was
// dropped is deleted. It resumes a stopped rollout.
func (a *api) Update(ctx context.Context, ownerID string, clusters []*rsyncv1.ClusterResources) (int64, error) {
	return a.UpdateGuest(ctx, ownerID, "", nil, clusters)
}

// UpdateGuest is Update with the rollout's host owner and drift setting
// (see SubmitGuest; nil repair keeps the rollout's).
func (a *api) UpdateGuest(ctx context.Context, ownerID, host string, repair *bool, clusters []*rsyncv1.ClusterResources) (int64, error) {
	return a.UpdateStaged(ctx, ownerID, host, repair, nil, clusters) // stages.go
}

// Delete deletes everything of ownerID's from every cluster, in reverse
// order. Deleting again is a no-op unless the rollout was stopped.
func (a *api) Delete(ctx context.Context, ownerID string) (int64, error) {
	return a.DeleteForced(ctx, ownerID, false)
}

// DeleteForced is Delete; with force, the deletion settles at once: what
// is not deleted yet is ORPHANED (orphans.go) and left on its cluster.
func (a *api) DeleteForced(ctx context.Context, ownerID string, force bool) (int64, error) {
	return a.change(ctx, ownerID, func(o *owner) (*rsyncv1.StoredRollout, []*object, error) {
		if o == nil {
			return nil, nil, errs.NotFound("rollout %q not found", ownerID)
		}
		if o.rec.GetDeleting() && !o.rec.GetStopped() && (!force || o.rec.GetForced()) {
			return nil, nil, nil
		}
		rec := proto.CloneOf(o.rec)
		rec.Deleting, rec.Stopped, rec.Forced = true, false, force || o.rec.GetForced()
		return rec, o.objs, nil
	})
}

// Stop halts ownerID's work: passes in flight stop at their next step and
// retries are not scheduled until an update or delete.
func (a *api) Stop(ctx context.Context, ownerID string) error {
	_, err := a.change(ctx, ownerID, func(o *owner) (*rsyncv1.StoredRollout, []*object, error) {
		if o == nil {
			return nil, nil, errs.NotFound("rollout %q not found", ownerID)
		}
		if o.rec.GetStopped() {
			return nil, nil, nil
		}
		rec := proto.CloneOf(o.rec)
		rec.Stopped = true
		return rec, o.objs, nil
	})
	return err
}

// change runs one desired-state change: next computes the new record from
// the current owner (nil if none; a nil record means no change), which is
// stored and then made current. next runs under apiMu, not mu: it may read
// o.rec and o.objs (changed only here) but must lock mu for anything else. A stop keeps the generation; every other
// change is a new one.
func (a *api) change(ctx context.Context, ownerID string, next func(*owner) (*rsyncv1.StoredRollout, []*object, error)) (int64, error) {
	return a.changeAs(ctx, ownerID, changeNew, next)
}

// changeAs is change; mode says what it makes of the generation (stages.go).
func (a *api) changeAs(ctx context.Context, ownerID string, mode changeMode, next func(*owner) (*rsyncv1.StoredRollout, []*object, error)) (int64, error) {
	if err := a.waitLoaded(ctx); err != nil {
		return 0, err
	}
	a.apiMu.Lock()
	defer a.apiMu.Unlock()
	// Another replica may have changed the rollout since this one polled.
	if err := a.replicas.refresh(ctx, ownerID); err != nil {
		return 0, err
	}
	a.mu.Lock()
	o := a.owners[ownerID]
	a.mu.Unlock()
	rec, objs, err := next(o)
	if err != nil {
		return 0, err
	}
	if rec == nil {
		a.mu.Lock()
		defer a.mu.Unlock()
		return o.rec.GetGeneration(), nil
	}
	stopping := rec.GetStopped() || mode == changeKeep
	if !stopping {
		rec.TraceParent = traceParent(ctx) // a stop keeps its generation's
	}
	var sealed []store.Secret
	if !stopping {
		prev, err := a.stage(o, rec, mode) // stages.go
		if err != nil {
			return 0, err
		}
		if prev != nil {
			sealed = append(sealed, *prev)
		}
	}
	if len(rec.GetSealed()) > 0 || (o != nil && len(o.rec.GetSealed()) > 0) {
		// Replaced at every change, so a manifest no longer sensitive (or
		// dropped) does not stay sealed in the record.
		sec, err := sealedManifests(rec, objs)
		if err != nil {
			return 0, err
		}
		sealed = append(sealed, sec)
	}
	if o == nil {
		rec.Generation = 1
		err = a.rollouts.Create(ctx, ownerID, "", rec, sealed...)
	} else {
		rec.Generation = o.rec.GetGeneration()
		if !stopping {
			rec.Generation++
		}
		err = a.rollouts.Update(ctx, ownerID, o.version, rec, sealed...)
	}
	a.writes.Add(1)
	if err != nil {
		return 0, err
	}
	version := int64(1)
	if o != nil {
		version = o.version + 1
	}
	if err := a.stamps.Set(ctx, ownerID, version); err != nil {
		// The record is stored: the others see it at their next full poll.
		a.log.Warn("stamp the rollout's version for the other replicas", zap.String("owner", ownerID), zap.Error(err))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if o == nil {
		o = &owner{version: 1, tasks: map[string]*task{}, changed: make(chan struct{})}
		a.owners[ownerID] = o
	} else {
		o.version++
	}
	o.rec, o.objs = rec, objs
	if !stopping {
		o.trace = newPassTrace(ctx, rec.GetGeneration()) // its passes join ctx's trace (trace.go)
	}
	a.replicas.adopted(o)
	return rec.GetGeneration(), nil
}

// Status reports where ownerID's rollout stands.
func (a *api) Status(ctx context.Context, ownerID string) (*rsyncv1.RolloutStatus, error) {
	if err := a.waitLoaded(ctx); err != nil {
		return nil, err
	}
	// Fresh: a caller deciding on the answer (core, before it deletes a
	// terminated logical cloud) sees what the replica that last answered
	// it had saved, however recently this one read the store.
	if err := a.known(ctx, ownerID, true); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.owners[ownerID]
	if !ok {
		return nil, errs.NotFound("rollout %q not found", ownerID)
	}
	return a.report(o, true), nil
}

// report is o's status (with its clusters when clusters is set), settled
// only once this replica's states of o are saved: what one replica shows
// settled, every other shows settled too. Called with mu held.
func (a *api) report(o *owner, clusters bool) *rsyncv1.RolloutStatus {
	st := o.statusOf(clusters)
	if st.GetSettled() && !a.saver.saved(o) {
		st.Settled = false
	}
	return st
}

// statesParallel bounds the owners States reads at once.
const statesParallel = 8

// States reports where each of owners' rollouts stands, as Status does but
// without the clusters: one call for many owners (a list page of logical
// clouds, a scrape of the gauges). An owner with no rollout is left out.
func (a *api) States(ctx context.Context, owners []string) ([]*rsyncv1.RolloutStatus, error) {
	if err := a.waitLoaded(ctx); err != nil {
		return nil, err
	}
	out := make([]*rsyncv1.RolloutStatus, len(owners))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(statesParallel)
	for i, id := range owners {
		g.Go(func() error {
			if err := a.known(gctx, id, false); err != nil {
				if errs.Code(err) == codes.NotFound {
					return nil
				}
				return err
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			if o, ok := a.owners[id]; ok {
				out[i] = a.report(o, false)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(out, func(st *rsyncv1.RolloutStatus) bool { return st == nil }), nil
}

// Watch sends ownerID's status now and after each change (at most every
// 100 ms), until ctx ends, send fails or, with untilSettled, the status is
// settled.
func (a *api) Watch(ctx context.Context, ownerID string, untilSettled bool, send func(*rsyncv1.RolloutStatus) error) error {
	if err := a.waitLoaded(ctx); err != nil {
		return err
	}
	for {
		if err := a.known(ctx, ownerID, false); err != nil {
			return err
		}
		a.mu.Lock()
		o, ok := a.owners[ownerID]
		if !ok {
			a.mu.Unlock()
			return errs.NotFound("rollout %q not found", ownerID)
		}
		st, changed := a.report(o, true), o.changed
		a.mu.Unlock()
		if err := send(st); err != nil {
			return err
		}
		if untilSettled && st.GetSettled() {
			return nil
		}
		var poll <-chan time.Time // other replicas' clusters: their saves are read
		if a.replicas.hasForeign(ownerID) {
			poll = time.After(time.Second)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-poll:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// known brings ownerID's rollout up to date with the store before it is
// reported: adopted if another replica submitted or changed it, and the
// saved states of the clusters other replicas work on read (at most every
// half second unless fresh).
func (a *api) known(ctx context.Context, ownerID string, fresh bool) error {
	// Read your writes across replicas: a change another replica just
	// stored is adopted now, not at the next poll (its stamp is written
	// before that replica answers the change).
	// With the store away, what this replica knows is answered.
	stamp, stamped, err := a.stamps.Get(ctx, ownerID)
	if err != nil {
		a.log.Debug("read the rollout's stamp; answering from memory", zap.String("owner", ownerID), zap.Error(err))
		stamped = false
	}
	a.mu.Lock()
	o, ok := a.owners[ownerID]
	ok = ok && (!stamped || o.version == stamp)
	a.mu.Unlock()
	if !ok {
		a.apiMu.Lock()
		err := a.replicas.refresh(ctx, ownerID)
		a.apiMu.Unlock()
		if err != nil {
			return err
		}
	}
	if err := a.replicas.refreshForeign(ctx, ownerID, fresh); err != nil {
		// Other replicas' clusters are shown as last read.
		a.log.Debug("read other replicas' cluster states; answering from memory", zap.String("owner", ownerID), zap.Error(err))
	}
	return nil
}

// summary is o's status without its clusters (state, settled, counts):
// nothing of the resources is copied. Called with mu held.
func (o *owner) summary() *rsyncv1.RolloutStatus { return o.statusOf(false) }

// statusOf summarizes o, with its clusters and their resources when
// clusters is set. Called with mu held.
func (o *owner) statusOf(clusters bool) *rsyncv1.RolloutStatus {
	gen := o.rec.GetGeneration()
	out := &rsyncv1.RolloutStatus{
		Owner: o.rec.GetOwner(), Generation: gen, Deleting: o.rec.GetDeleting(), Stopped: o.rec.GetStopped(),
	}
	targeted := map[string]bool{}
	for _, tg := range o.rec.GetTargets() {
		targeted[clusterKey(tg.GetProvider(), tg.GetCluster())] = true
	}
	var states []rsyncv1.State
	for _, t := range o.sortedTasks() {
		goal := rsyncv1.State_STATE_APPLIED
		waiting := o.waiting[clusterKey(t.provider, t.cluster)] // holds its previous generation (stages.go)
		if (o.rec.GetDeleting() || !targeted[clusterKey(t.provider, t.cluster)]) && !waiting {
			goal = rsyncv1.State_STATE_DELETED
		}
		cs := &rsyncv1.RolloutClusterStatus{Provider: t.provider, Cluster: t.cluster, Generation: t.state.GetGeneration()}
		if clusters {
			cs.Resources, cs.Drift = make([]*rsyncv1.ResourceStatus, 0, len(t.state.GetResources())), driftOfStatus(t.state)
		}
		var rs []rsyncv1.State
		var latest time.Time
		for _, r := range t.state.GetResources() {
			gen := gen
			if waiting {
				gen = r.GetGeneration()
			}
			if clusters {
				cs.Resources = append(cs.Resources, copyResource(r))
			}
			cs.Total++
			if done(r, gen) && r.GetState() != rsyncv1.State_STATE_FAILED && r.GetState() != rsyncv1.State_STATE_ORPHANED {
				cs.Ready++
			}
			if r.GetLastError() != "" && !r.GetUpdated().AsTime().Before(latest) {
				cs.LastError, latest = r.GetLastError(), r.GetUpdated().AsTime()
			}
			st := r.GetState()
			if done(r, gen) && st != rsyncv1.State_STATE_FAILED && st != rsyncv1.State_STATE_ORPHANED {
				st = goal
			} else if !done(r, gen) && st != rsyncv1.State_STATE_RETRYING {
				st = rsyncv1.State_STATE_PENDING
			}
			rs = append(rs, st)
		}
		cs.State = summarize(rs, goal, o.rec.GetStopped())
		out.Ready += cs.Ready
		out.Total += cs.Total
		if clusters {
			out.Clusters = append(out.Clusters, cs)
		}
		if (cs.State == rsyncv1.State_STATE_DELETED || cs.State == rsyncv1.State_STATE_ORPHANED) && goal == rsyncv1.State_STATE_DELETED && !o.rec.GetDeleting() {
			states = append(states, rsyncv1.State_STATE_APPLIED) // a dropped cluster, emptied
		} else {
			states = append(states, cs.State)
		}
	}
	goal := rsyncv1.State_STATE_APPLIED
	if o.rec.GetDeleting() {
		goal = rsyncv1.State_STATE_DELETED
	}
	out.State = summarize(states, goal, o.rec.GetStopped())
	out.Settled = out.GetState() != rsyncv1.State_STATE_PENDING && out.GetState() != rsyncv1.State_STATE_RETRYING
	stagedStatus(o, out) // stages.go
	return out
}

// copyResource copies r for a status that leaves the lock: by hand, as
// status copies every resource of every cluster (80,000 of them for a
// rollout on 10,000 clusters) while workers wait for the lock, and
// proto.Clone's reflection took most of that time. A test checks that
// it copies every field (TestCopyResourceCopiesEveryField).
func copyResource(r *rsyncv1.ResourceStatus) *rsyncv1.ResourceStatus {
	c := &rsyncv1.ResourceStatus{
		ApiVersion: r.GetApiVersion(), Kind: r.GetKind(), Namespace: r.GetNamespace(), Name: r.GetName(),
		Operation: r.GetOperation(), State: r.GetState(), Attempts: r.GetAttempts(), LastError: r.GetLastError(),
		ManifestHash: r.GetManifestHash(), Generation: r.GetGeneration(), Owned: r.GetOwned(),
	}
	if t := r.GetNextRetry(); t != nil {
		c.NextRetry = &timestamppb.Timestamp{Seconds: t.GetSeconds(), Nanos: t.GetNanos()}
	}
	if t := r.GetUpdated(); t != nil {
		c.Updated = &timestamppb.Timestamp{Seconds: t.GetSeconds(), Nanos: t.GetNanos()}
	}
	return c
}

// summarize folds states into one: retrying if any retries, pending (or
// stopped) if any is not done, failed if any failed, else the goal.
func summarize(states []rsyncv1.State, goal rsyncv1.State, stopped bool) rsyncv1.State {
	has := map[rsyncv1.State]bool{}
	for _, s := range states {
		has[s] = true
	}
	switch {
	case stopped && (has[rsyncv1.State_STATE_RETRYING] || has[rsyncv1.State_STATE_PENDING] || has[rsyncv1.State_STATE_STOPPED]):
		return rsyncv1.State_STATE_STOPPED
	case has[rsyncv1.State_STATE_RETRYING]:
		return rsyncv1.State_STATE_RETRYING
	case has[rsyncv1.State_STATE_PENDING]:
		return rsyncv1.State_STATE_PENDING
	case has[rsyncv1.State_STATE_FAILED]:
		return rsyncv1.State_STATE_FAILED
	case has[rsyncv1.State_STATE_ORPHANED]:
		return rsyncv1.State_STATE_ORPHANED
	default:
		return goal
	}
}
