package engine

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// Reconcile: what each task must do to reach its owner's generation (the
// resources to apply, in order, then those to delete, in reverse), and
// which step comes next. Passes (pass.go) run those steps (step.go).

// reconcile brings every task of o to o's generation: what to apply, what
// to delete. Called with mu held, after o.rec changed or on load.
func (p *applier) reconcile(o *owner) { p.reconcileWhere(o, nil) }

// reconcileWhere is reconcile for the tasks of the clusters where says
// (nil: all). Called with mu held.
func (p *applier) reconcileWhere(o *owner, where func(provider, cluster string) bool) {
	// A staged generation (stages.go): the clusters not yet admitted keep
	// the previous one; those admitted before, at this generation, were
	// reconciled then (only a takeover's where reconciles them again).
	wasWaiting, sameGen := o.waiting, o.gatedGen == o.rec.GetGeneration() && o.rec.GetProgress() != nil
	gate(o)
	settledBefore := func(key string) bool { return where == nil && sameGen && !wasWaiting[key] && !o.waiting[key] }
	targets := map[string]*rsyncv1.StoredTarget{}
	for _, tg := range o.rec.GetTargets() {
		key := clusterKey(tg.GetProvider(), tg.GetCluster())
		targets[key] = tg
		if (where == nil || where(tg.GetProvider(), tg.GetCluster())) && !o.waiting[key] {
			p.addTask(o, tg.GetProvider(), tg.GetCluster())
		}
	}
	for key, t := range o.tasks {
		if where != nil && !where(t.provider, t.cluster) || o.waiting[key] || settledBefore(key) {
			continue
		}
		var want []*object
		if tg, ok := targets[key]; ok && !o.rec.GetDeleting() {
			for _, i := range tg.GetManifests() {
				want = append(want, o.objs[i])
			}
		}
		t.reconcile(o.rec.GetGeneration(), applyOrder(want))
		if o.rec.GetProgress() != nil {
			p.finishIdle(t) // stages.go
		}
		if o.rec.GetForced() {
			p.orphan(t, forcedNote(t.provider, t.cluster))
		}
	}
}

// reconcile sets t's resources for generation gen: want in order (to
// apply), then the others it still has (to delete). Entries already at gen
// (loaded after a restart) are kept as they are, retry schedule included;
// an entry applied from the same manifest stays applied: unchanged
// resources are not applied again.
func (t *task) reconcile(gen int64, want []*object) {
	old := map[string]*rsyncv1.ResourceStatus{}
	for _, r := range t.state.GetResources() {
		old[keyOf(r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName())] = r
	}
	now := timestamppb.Now()
	reset := func(r *rsyncv1.ResourceStatus, op rsyncv1.Operation) {
		r.Operation, r.State, r.Attempts, r.NextRetry, r.LastError, r.Updated =
			op, rsyncv1.State_STATE_PENDING, 0, nil, "", now
	}
	t.desired = map[string]*object{}
	var res []*rsyncv1.ResourceStatus
	for _, obj := range want {
		t.desired[obj.key] = obj
		r, ok := old[obj.key]
		delete(old, obj.key)
		switch {
		case !ok:
			r = &rsyncv1.ResourceStatus{}
			reset(r, rsyncv1.Operation_OPERATION_APPLY)
		case r.GetGeneration() == gen && r.GetManifestHash() == obj.hash:
		case r.GetOperation() == rsyncv1.Operation_OPERATION_APPLY && r.GetState() == rsyncv1.State_STATE_APPLIED &&
			r.GetManifestHash() == obj.hash:
		default:
			reset(r, rsyncv1.Operation_OPERATION_APPLY)
		}
		// A new apiVersion of the same object is what the next apply sends.
		r.ApiVersion, r.Kind, r.Namespace, r.Name = obj.u.GetAPIVersion(), obj.u.GetKind(), obj.u.GetNamespace(), obj.u.GetName()
		r.ManifestHash, r.Generation = obj.hash, gen
		res = append(res, r)
	}
	for _, r := range t.state.GetResources() {
		if _, dropped := old[keyOf(r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName())]; !dropped {
			continue
		}
		deleted := r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE && r.GetState() == rsyncv1.State_STATE_DELETED ||
			r.GetState() == rsyncv1.State_STATE_ORPHANED // never worked on again
		switch {
		case r.GetGeneration() == gen:
		case deleted && len(want) > 0:
			continue // deleted by an earlier generation: no longer shown
		case deleted:
		case r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE && r.GetState() != rsyncv1.State_STATE_FAILED:
			// a delete still under way keeps its retry count
		default:
			reset(r, rsyncv1.Operation_OPERATION_DELETE)
		}
		r.Generation = gen
		res = append(res, r)
	}
	t.state.Resources = res
	t.dirty = true
	t.next = time.Time{}
	if t.cancel != nil {
		t.cancel() // a pass of an older generation stops at its next step
	}
}

// done says whether r needs no more work at generation gen.
func done(r *rsyncv1.ResourceStatus, gen int64) bool {
	switch r.GetState() {
	case rsyncv1.State_STATE_APPLIED:
		return r.GetOperation() == rsyncv1.Operation_OPERATION_APPLY
	case rsyncv1.State_STATE_DELETED:
		return r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE
	case rsyncv1.State_STATE_FAILED:
		return r.GetGeneration() == gen
	case rsyncv1.State_STATE_ORPHANED:
		return true
	default:
		return false
	}
}

// nextStep is the index of t's next resource to work on: applies in
// order, then deletes in reverse order; -1 when none is left.
func (t *task) nextStep(gen int64) int {
	res := t.state.GetResources()
	for i, r := range res {
		if r.GetOperation() == rsyncv1.Operation_OPERATION_APPLY && !done(r, gen) {
			return i
		}
	}
	for i := len(res) - 1; i >= 0; i-- {
		if r := res[i]; r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE && !done(r, gen) {
			return i
		}
	}
	return -1
}
