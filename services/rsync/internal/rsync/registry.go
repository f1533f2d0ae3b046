package rsync

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/store"
)

// DefaultRegistryPoll is how often a cluster watch (WatchClusters) reads
// the registry for the changes made through other rsync replicas; those
// made through this one are sent at once.
const DefaultRegistryPoll = 5 * time.Second

// registryChanges wakes this replica's cluster watches when a cluster is
// registered, changed or deleted through it.
type registryChanges struct {
	mu sync.Mutex
	ch chan struct{}
}

func newRegistryChanges() *registryChanges {
	return &registryChanges{ch: make(chan struct{})}
}

// changed wakes every watch waiting on the channel wait returned.
func (r *registryChanges) changed() {
	r.mu.Lock()
	close(r.ch)
	r.ch = make(chan struct{})
	r.mu.Unlock()
}

// wait is closed at the next change.
func (r *registryChanges) wait() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ch
}

// WatchClusters implements rsyncv1.RsyncInternalServiceServer: the
// registry now, then what changes in it, read from the store (so a change
// made through any replica is seen) when this replica changes a cluster
// and every RegistryPoll.
func (rg *registry) WatchClusters(_ *rsyncv1.WatchClustersRequest, stream rsyncv1.RsyncInternalService_WatchClustersServer) error {
	ctx := stream.Context()
	poll := rg.RegistryPoll
	if poll <= 0 {
		poll = DefaultRegistryPoll
	}
	var seen map[string]*rsyncv1.Cluster
	for {
		wake := rg.changes.wait() // before the read: a change after it wakes us
		now, err := rg.registryNow(ctx)
		if err != nil {
			return err
		}
		changes := registryDiff(seen, now)
		if seen == nil || len(changes) > 0 {
			if err := stream.Send(&rsyncv1.WatchClustersResponse{Initial: seen == nil, Changes: changes}); err != nil {
				return err
			}
		}
		seen = now
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// registryNow is every registered cluster, by "provider/cluster".
func (rg *registry) registryNow(ctx context.Context) (map[string]*rsyncv1.Cluster, error) {
	providers, err := rg.providers.List(ctx, "")
	if err != nil {
		return nil, err
	}
	out := map[string]*rsyncv1.Cluster{}
	for _, p := range providers {
		cs, err := rg.clusters.List(ctx, p.GetMetadata().GetName())
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			out[store.Key(p.GetMetadata().GetName(), c.GetMetadata().GetName())] = c
		}
	}
	return out, nil
}

// registryDiff is what changed from was to now (was nil: everything is
// added), ordered by provider and cluster.
func registryDiff(was, now map[string]*rsyncv1.Cluster) []*rsyncv1.ClusterChange {
	var out []*rsyncv1.ClusterChange
	change := func(kind rsyncv1.ClusterChange_Kind, key string, labels, previous []string) {
		provider, cluster, _ := strings.Cut(key, "/")
		out = append(out, &rsyncv1.ClusterChange{Kind: kind, Provider: provider, Cluster: cluster, Labels: labels, PreviousLabels: previous})
	}
	for key, c := range now {
		labels := c.GetSpec().GetLabels()
		old, ok := was[key]
		switch {
		case !ok:
			change(rsyncv1.ClusterChange_KIND_ADDED, key, labels, nil)
		case !sameLabels(old.GetSpec().GetLabels(), labels):
			change(rsyncv1.ClusterChange_KIND_LABELS_CHANGED, key, labels, old.GetSpec().GetLabels())
		}
	}
	for key, c := range was {
		if _, ok := now[key]; !ok {
			change(rsyncv1.ClusterChange_KIND_DELETED, key, nil, c.GetSpec().GetLabels())
		}
	}
	slices.SortFunc(out, func(a, b *rsyncv1.ClusterChange) int {
		return strings.Compare(a.GetProvider()+"/"+a.GetCluster(), b.GetProvider()+"/"+b.GetCluster())
	})
	return out
}

// sameLabels says whether a and b hold the same labels, in any order.
func sameLabels(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
