package engine

import (
	"slices"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// errReappears is a repair's error when a change no other manager made
// comes back right after the repair: the cluster does not keep the field
// as applied (a field the API server drops), so applying again is no
// repair.
const errReappears = "the change reappears after each repair: the cluster does not keep these fields as applied"

// sameObject says whether drift record d is about resource r.
func sameObject(d *rsyncv1.Drift, r *rsyncv1.ResourceStatus) bool {
	return d.GetKind() == r.GetKind() && d.GetNamespace() == r.GetNamespace() && d.GetName() == r.GetName() &&
		keyOf(d.GetApiVersion(), d.GetKind(), "", "") == keyOf(r.GetApiVersion(), r.GetKind(), "", "")
}

// lastDrift is t's newest drift record of r; nil if none. Called with mu
// held.
func lastDrift(t *task, r *rsyncv1.ResourceStatus) *rsyncv1.Drift {
	ds := t.state.GetDrift()
	for i := len(ds) - 1; i >= 0; i-- {
		if sameObject(ds[i], r) {
			return ds[i]
		}
	}
	return nil
}

// repairing says whether r's next apply is a drift repair: the owner
// wants drift repaired and r's newest drift record is not repaired yet.
// A repair is forced: it takes back the fields another manager took.
// Called with mu held.
func (dw *driftWatcher) repairing(t *task, r *rsyncv1.ResourceStatus) bool {
	if t.owner.rec.GetReportDriftOnly() || r.GetOperation() != rsyncv1.Operation_OPERATION_APPLY {
		return false
	}
	d := lastDrift(t, r)
	return d != nil && !d.GetRepaired() && d.GetError() != errReappears
}

// noteDrift records drift d of t's resource r, which is applied; unless
// the owner only wants drift reported, r is marked for a repair and the
// cluster's worker woken. The same drift noticed again before anything
// else changed is not recorded twice. Called with mu held.
func (dw *driftWatcher) noteDrift(t *task, r *rsyncv1.ResourceStatus, d *rsyncv1.Drift) {
	if !appliedAndOwned(r) {
		return // a repair is under way, or the resource is being worked on
	}
	prev := lastDrift(t, r)
	repair := !t.owner.rec.GetReportDriftOnly()
	if prev != nil && !prev.GetRepaired() && prev.GetDeleted() == d.GetDeleted() && slices.Equal(prev.GetFields(), d.GetFields()) &&
		(!repair || prev.GetError() == errReappears) {
		return // already reported (a drift reported before repair was asked for is repaired now)
	}
	result := "reported"
	if repair && prev != nil && prev.GetRepaired() && !d.GetDeleted() && len(d.GetManagers()) == 0 &&
		slices.Equal(prev.GetFields(), d.GetFields()) {
		repair, result, d.Error = false, "failed", errReappears
	}
	t.state.Drift = append(t.state.Drift, d)
	if n := len(t.state.Drift); n > maxDrift {
		t.state.Drift = slices.Clone(t.state.Drift[n-maxDrift:])
	}
	dw.log.Info("drift: an applied object was changed on the cluster",
		zap.String("owner", t.owner.rec.GetOwner()), zap.String("cluster", clusterKey(t.provider, t.cluster)),
		zap.String("object", describe(d.GetApiVersion(), d.GetKind(), d.GetNamespace(), d.GetName())),
		zap.Bool("deleted", d.GetDeleted()), zap.Strings("fields", d.GetFields()), zap.Strings("managers", d.GetManagers()),
		zap.Bool("repair", repair))
	if repair {
		r.State, r.Attempts, r.NextRetry, r.LastError = rsyncv1.State_STATE_PENDING, 0, nil, ""
		r.Updated = timestamppb.Now()
		t.next = time.Time{}
		if w := dw.workers[clusterKey(t.provider, t.cluster)]; w != nil {
			select {
			case w.kick <- struct{}{}:
			default:
			}
		}
	} else {
		driftTotal.WithLabelValues(d.GetKind(), result).Inc()
	}
	t.dirty = true
	t.owner.notify()
}

// noteRepair records how the apply of t's resource r went when it was a
// repair: repaired, or why not (a retryable error is retried like any
// step; its record says repaired once it is). Called with mu held, after
// r was set from the step's outcome.
func (dw *driftWatcher) noteRepair(t *task, r *rsyncv1.ResourceStatus, err error) {
	if !dw.repairing(t, r) {
		return
	}
	d := lastDrift(t, r)
	switch {
	case err == nil:
		d.Repaired, d.Error = true, ""
		driftTotal.WithLabelValues(d.GetKind(), "repaired").Inc()
		dw.log.Info("drift: repaired", traceField(t), zap.String("owner", t.owner.rec.GetOwner()),
			zap.String("cluster", clusterKey(t.provider, t.cluster)),
			zap.String("object", describe(d.GetApiVersion(), d.GetKind(), d.GetNamespace(), d.GetName())),
			zap.Bool("deleted", d.GetDeleted()), zap.Strings("fields", d.GetFields()))
	case Retryable(err):
		d.Error = Cause(err)
	default:
		d.Error = Cause(err)
		driftTotal.WithLabelValues(d.GetKind(), "failed").Inc()
	}
}

// driftOfStatus copies a cluster state's drift records for a status.
func driftOfStatus(st *rsyncv1.StoredClusterState) []*rsyncv1.Drift {
	out := make([]*rsyncv1.Drift, 0, len(st.GetDrift()))
	for _, d := range st.GetDrift() {
		out = append(out, proto.CloneOf(d))
	}
	return out
}
