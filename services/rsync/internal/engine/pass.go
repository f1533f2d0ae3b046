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
func (p *applier) pass(parent context.Context, t *task) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	p.mu.Lock()
	t.cancel = cancel
	// Checkpoints count from the pass's start: a short pass writes once, at its end.
	t.lastFlush = time.Now()
	o := t.owner
	gen := o.rec.GetGeneration()
	ctx, endSpan := p.saver.tracePass(ctx, t, gen) // one span per pass (trace.go)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		t.cancel = nil
		p.mu.Unlock()
		p.saver.flush(t, true)
	}()
	defer endSpan()

	cl, connErr := p.connect.Connect(ctx, t.provider, t.cluster)
	if errors.Is(connErr, ErrUnregistered) {
		p.mu.Lock()
		if o.rec.GetGeneration() == gen {
			p.orphan(t, unregisteredNote(t.provider, t.cluster))
			t.state.Generation = gen
			p.saver.flushLocked(t, true)
		}
		p.mu.Unlock()
		return
	}
	namespaces := map[string]error{} // what checkNamespace found, for this pass
	for {
		p.mu.Lock()
		if ctx.Err() != nil || o.rec.GetGeneration() != gen || o.rec.GetStopped() || o.waiting[clusterKey(t.provider, t.cluster)] {
			p.mu.Unlock()
			return
		}
		i := t.nextStep(gen)
		if i < 0 {
			t.state.Generation = gen
			t.dirty = true
			p.saver.flushLocked(t, true) // queued before a watcher reads it settled
			o.notify()
			p.mu.Unlock()
			return
		}
		r := proto.CloneOf(t.state.GetResources()[i])
		obj := t.desired[keyOf(r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName())]
		in := p.stepInfo(t, r)
		p.mu.Unlock()

		out := outcome{err: connErr, owned: r.GetOwned()}
		if connErr == nil {
			out = p.step(ctx, cl, in, r, obj, namespaces)
		}
		if ctx.Err() != nil {
			return // stopped or superseded: the step's outcome is not recorded
		}
		retry := p.record(t, i, gen, out)
		if retry {
			return
		}
		p.saver.flush(t, false)
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
func (p *applier) stepInfo(t *task, r *rsyncv1.ResourceStatus) stepInfo {
	o := t.owner
	owner := o.rec.GetOwner()
	ck := clusterKey(t.provider, t.cluster)
	key := keyOf(r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName())
	in := stepInfo{owner: owner, owned: r.GetOwned(), host: o.rec.GetHostOwner(), repair: p.drift.repairing(t, r)}
	if c := p.claimant(ck, key); c != "" && c != owner {
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
		} else if c := p.claimant(ck, nsKey); c != "" && c != owner && c != in.host {
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
func (p *applier) record(t *task, i int, gen int64, out outcome) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.owner.rec.GetGeneration() != gen {
		return true
	}
	r := t.state.GetResources()[i]
	p.setOwned(t, r, out.owned)
	now := time.Now()
	r.Updated = timestamppb.New(now)
	t.dirty = true
	defer t.owner.notify()
	defer p.drift.noteRepair(t, r, out.err)
	op := "apply"
	if r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE {
		op = "delete"
	}
	switch err := out.err; {
	case err == nil:
		operations.WithLabelValues(op, "ok").Inc()
		if r.GetState() == rsyncv1.State_STATE_RETRYING {
			p.log.Info("step succeeded after retries", traceField(t), zap.String("owner", t.owner.rec.GetOwner()),
				zap.String("cluster", clusterKey(t.provider, t.cluster)), zap.String("operation", op),
				zap.String("object", objectName(r.GetKind(), r.GetNamespace(), r.GetName())), zap.Int32("attempts", r.GetAttempts()+1))
		}
		r.State, r.Attempts, r.NextRetry, r.LastError = rsyncv1.State_STATE_APPLIED, 0, nil, out.note
		if r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE {
			r.State = rsyncv1.State_STATE_DELETED
		}
		return false
	case Retryable(err):
		operations.WithLabelValues(op, "retry").Inc()
		// The delay is the backoff of the attempts before this one, as
		// always (base, base, 2 base, 4 base, ...).
		attempt, delay := r.GetAttempts()+1, p.backoff(int(r.GetAttempts()))
		p.logFailure(t, r, op, err, attempt, delay)
		r.State, r.Attempts, r.LastError = rsyncv1.State_STATE_RETRYING, attempt, Cause(err)
		t.next = now.Add(delay)
		r.NextRetry = timestamppb.New(t.next)
		return true
	default:
		operations.WithLabelValues(op, "failed").Inc()
		p.logFailure(t, r, op, err, r.GetAttempts()+1, 0)
		r.State, r.Attempts, r.NextRetry, r.LastError = rsyncv1.State_STATE_FAILED, r.GetAttempts()+1, nil, Cause(err)
		r.Generation = gen
		return false
	}
}

// logFailure logs a failed step's full error (tenants see only its Cause)
// with its owner, cluster and object. A terminal failure (delay 0: not
// retried until the rollout changes) is logged at info. A retry is logged
// at info when its cause is new for the resource, and again at attempts
// 2, 4, 8, 16, ... as a reminder that it still fails; the other repeats
// are at debug. A cluster down for an hour thus writes about five info
// lines per resource it waits on, not one per backoff.
func (p *applier) logFailure(t *task, r *rsyncv1.ResourceStatus, op string, err error, attempt int32, delay time.Duration) {
	lvl := zap.InfoLevel
	retry := delay > 0
	if retry && r.GetLastError() == Cause(err) && attempt&(attempt-1) != 0 {
		lvl = zap.DebugLevel
	}
	ce := p.log.Check(lvl, "step failed")
	if ce == nil {
		return
	}
	fields := []zap.Field{traceField(t), zap.String("owner", t.owner.rec.GetOwner()), zap.String("cluster", clusterKey(t.provider, t.cluster)),
		zap.String("operation", op), zap.String("object", objectName(r.GetKind(), r.GetNamespace(), r.GetName())),
		zap.Int32("attempt", attempt), zap.Bool("retry", retry)}
	if retry {
		fields = append(fields, zap.Duration("retry_in", delay))
	}
	ce.Write(append(fields, zap.Error(err))...)
}
