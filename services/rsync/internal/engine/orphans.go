package engine

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// Orphans: a resource rsync stops working on while its object may remain
// on the cluster is ORPHANED, listed in the status with why, never
// retried, and does not keep the rollout from settling. Two things orphan
// resources: the cluster was deleted from the registry (its pass cannot
// connect any more: ErrUnregistered), or the owner forced the rollout's
// deletion (DeleteForced) because a cluster will not come back. It is the
// way out of a deletion that would otherwise wait for ever.

var orphaned = promauto.NewCounter(prometheus.CounterOpts{
	Name: "dcm_rsync_orphaned_total",
	Help: "Resources rsync stopped working on while their objects may remain on a cluster (cluster unregistered, or deletion forced).",
})

// ErrUnregistered is wrapped by a Connector's error for a cluster that is
// not (or no longer) in the registry.
var ErrUnregistered = errors.New("the cluster is not registered")

// orphan marks every resource of t that is not deleted ORPHANED, saying
// why. Called with mu held.
func (p *applier) orphan(t *task, why string) {
	now := timestamppb.Now()
	gen := t.owner.rec.GetGeneration()
	changed := false
	for _, r := range t.state.GetResources() {
		if r.GetState() == rsyncv1.State_STATE_ORPHANED || (r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE && r.GetState() == rsyncv1.State_STATE_DELETED) {
			continue
		}
		r.State, r.Attempts, r.NextRetry, r.LastError, r.Updated, r.Generation =
			rsyncv1.State_STATE_ORPHANED, 0, nil, why, now, gen
		orphaned.Inc()
		changed = true
	}
	if changed {
		t.dirty = true
		t.owner.notify()
	}
}

// forcedNote is why a forced deletion orphans a resource.
func forcedNote(provider, cluster string) string {
	return fmt.Sprintf("deletion forced before rsync could delete it: the object may remain on cluster %s/%s", provider, cluster)
}

// unregisteredNote is why a cluster's removal orphans a resource.
func unregisteredNote(provider, cluster string) string {
	return fmt.Sprintf("cluster %s/%s was deleted from the registry: the object may remain on it", provider, cluster)
}
