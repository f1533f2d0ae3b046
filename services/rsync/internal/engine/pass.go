package engine

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// pass works on t's resources in order until all are done, one needs a
// retry (t then waits for it), or the owner changes.
func (e *Engine) pass(parent context.Context, t *task) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	e.mu.Lock()
	t.cancel = cancel
	// Checkpoints count from the pass's start: a short pass writes once, at its end.
	t.lastFlush = time.Now()
	o := t.owner
	gen := o.rec.GetGeneration()
	ctx, endSpan := e.tracePass(ctx, t, gen) // one span per pass (trace.go)
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		t.cancel = nil
		e.mu.Unlock()
		e.flush(t, true)
	}()
	defer endSpan()

	cl, connErr := e.connect.Connect(ctx, t.provider, t.cluster)
	if errors.Is(connErr, ErrUnregistered) {
		e.mu.Lock()
		if o.rec.GetGeneration() == gen {
			e.orphan(t, unregisteredNote(t.provider, t.cluster))
			t.state.Generation = gen
		}
		e.mu.Unlock()
		return
	}
	namespaces := map[string]error{} // what checkNamespace found, for this pass
	for {
		e.mu.Lock()
		if ctx.Err() != nil || o.rec.GetGeneration() != gen || o.rec.GetStopped() {
			e.mu.Unlock()
			return
		}
		i := t.nextStep(gen)
		if i < 0 {
			t.state.Generation = gen
			t.dirty = true
			o.notify()
			e.mu.Unlock()
			return
		}
		r := proto.CloneOf(t.state.GetResources()[i])
		obj := t.desired[keyOf(r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName())]
		in := e.stepInfo(t, r)
		e.mu.Unlock()

		out := outcome{err: connErr, owned: r.GetOwned()}
		if connErr == nil {
			out = e.step(ctx, cl, in, r, obj, namespaces)
		}
		if ctx.Err() != nil {
			return // stopped or superseded: the step's outcome is not recorded
		}
		retry := e.record(t, i, gen, out)
		if retry {
			return
		}
		e.flush(t, false)
	}
}

// stepInfo is what a step needs of rsync's records, read under mu before
// the step runs without it.
type stepInfo struct {
	owner string
	// owned: this owner's record holds the object as applied by rsync.
	owned bool
	// other is another owner that rsync's record says manages the object.
	other string
	// nsOwned, for a namespaced object whose Namespace this rollout
	// applies on the cluster too: +1 if that Namespace is this owner's, -1
	// if not (its apply failed or was refused); 0 otherwise.
	nsOwned int
	// nsOther is another owner that rsync's record says manages the
	// object's Namespace.
	nsOther string
	// host is the owner whose Namespaces the rollout may use besides its
	// own (StoredRollout.host_owner).
	host string
	// labels of the manifest the record says was applied, for deleting an
	// object applied before objects were stamped; labelsKnown is false
	// when that manifest is no longer in the rollout.
	labels      map[string]string
	labelsKnown bool
	// repair: the apply repairs drift (driftrecord.go), forced.
	repair bool
}

// stepInfo reads what resource r of t needs. Called with mu held.
func (e *Engine) stepInfo(t *task, r *rsyncv1.ResourceStatus) stepInfo {
	o := t.owner
	owner := o.rec.GetOwner()
	ck := clusterKey(t.provider, t.cluster)
	key := keyOf(r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName())
	in := stepInfo{owner: owner, owned: r.GetOwned(), host: o.rec.GetHostOwner(), repair: e.repairing(t, r)}
	if c := e.claimant(ck, key); c != "" && c != owner {
		in.other = c
	}
	if ns := r.GetNamespace(); ns != "" && r.GetOperation() == rsyncv1.Operation_OPERATION_APPLY {
		nsKey := keyOf("v1", "Namespace", "", ns)
		if _, ok := t.desired[nsKey]; ok {
			in.nsOwned = -1
			for _, nr := range t.state.GetResources() {
				if nr.GetKind() == "Namespace" && nr.GetName() == ns && nr.GetNamespace() == "" && nr.GetApiVersion() == "v1" && nr.GetOwned() {
					in.nsOwned = 1
				}
			}
		} else if c := e.claimant(ck, nsKey); c != "" && c != owner && c != in.host {
			in.nsOther = c
		}
	}
	if r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE {
		for _, obj := range o.objs {
			if obj.key == key && obj.hash == r.GetManifestHash() {
				in.labels, in.labelsKnown = obj.u.GetLabels(), true
				break
			}
		}
	}
	return in
}

// outcome is what a step did.
type outcome struct {
	err error
	// owned says whether the object is now this owner's on the cluster.
	owned bool
	// note says why a delete left the object on the cluster.
	note string
}

// record sets resource i of t from a step's outcome; true if t must now
// wait for a retry.
func (e *Engine) record(t *task, i int, gen int64, out outcome) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if t.owner.rec.GetGeneration() != gen {
		return true
	}
	r := t.state.GetResources()[i]
	e.setOwned(t, r, out.owned)
	now := time.Now()
	r.Updated = timestamppb.New(now)
	t.dirty = true
	defer t.owner.notify()
	defer e.noteRepair(t, r, out.err)
	op := "apply"
	if r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE {
		op = "delete"
	}
	switch err := out.err; {
	case err == nil:
		operations.WithLabelValues(op, "ok").Inc()
		r.State, r.Attempts, r.NextRetry, r.LastError = rsyncv1.State_STATE_APPLIED, 0, nil, out.note
		if r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE {
			r.State = rsyncv1.State_STATE_DELETED
		}
		return false
	case Retryable(err):
		operations.WithLabelValues(op, "retry").Inc()
		e.logCause(t, r, op, err)
		r.State, r.Attempts, r.LastError = rsyncv1.State_STATE_RETRYING, r.GetAttempts()+1, Cause(err)
		t.next = now.Add(e.backoff(int(r.GetAttempts())))
		r.NextRetry = timestamppb.New(t.next)
		return true
	default:
		operations.WithLabelValues(op, "failed").Inc()
		e.logCause(t, r, op, err)
		r.State, r.Attempts, r.NextRetry, r.LastError = rsyncv1.State_STATE_FAILED, r.GetAttempts()+1, nil, Cause(err)
		r.Generation = gen
		return false
	}
}

// logCause logs a step's full error, which tenants see only as its Cause:
// at info when the cause is new for the resource, at debug when a retry
// fails again the same way.
func (e *Engine) logCause(t *task, r *rsyncv1.ResourceStatus, op string, err error) {
	lvl := zap.InfoLevel
	if r.GetLastError() == Cause(err) {
		lvl = zap.DebugLevel
	}
	e.log.Log(lvl, "step failed", traceField(t), zap.String("owner", t.owner.rec.GetOwner()), zap.String("cluster", t.provider+"/"+t.cluster),
		zap.String("operation", op), zap.String("object", objectName(r.GetKind(), r.GetNamespace(), r.GetName())), zap.Error(err))
}
