package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// ObjectOwners tells, for owner, who manages one object on each of
// clusters (in their order): rsync's record answers for the objects it
// applied; for the others the object is read from the cluster. Clusters
// are asked at most 16 at a time. Bad input is InvalidArgument naming the
// field: a cluster given twice or not registered, a namespaced kind
// without a namespace.
func (a *api) ObjectOwners(ctx context.Context, owner, apiVersion, kind, namespace, name string, clusters []*rsyncv1.ClusterRef) ([]*rsyncv1.ObjectOwner, error) {
	if err := a.waitLoaded(ctx); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, c := range clusters {
		field, ck := fmt.Sprintf("clusters[%d]", i), clusterKey(c.GetProvider(), c.GetCluster())
		if seen[ck] {
			return nil, errs.Invalid(field, "cluster %s is given twice", ck)
		}
		seen[ck] = true
		if err := a.connect.Known(ctx, c.GetProvider(), c.GetCluster()); err != nil {
			if errs.Code(err) == codes.NotFound {
				return nil, errs.Invalid(field, "cluster %s is not registered", ck)
			}
			return nil, err
		}
	}
	key, gvk := keyOf(apiVersion, kind, namespace, name), schemaGVK(apiVersion, kind)
	out := make([]*rsyncv1.ObjectOwner, len(clusters))
	failed := make([]error, len(clusters))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, c := range clusters {
		res := &rsyncv1.ObjectOwner{Provider: c.GetProvider(), Cluster: c.GetCluster()}
		out[i] = res
		a.mu.Lock()
		var claimant string // rsync's record answers for the clusters this replica works on
		if ck := clusterKey(c.GetProvider(), c.GetCluster()); a.shards.active(shardOf(ck, a.shards.n)) != nil {
			claimant = a.claimant(ck, key)
		}
		a.mu.Unlock()
		if claimant != "" {
			res.Owner, res.State = claimant, rsyncv1.Ownership_OWNERSHIP_OTHER_OWNER
			if claimant == owner {
				res.State = rsyncv1.Ownership_OWNERSHIP_OWNED
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cl, err := a.connect.Connect(ctx, res.GetProvider(), res.GetCluster())
			if err != nil {
				res.State, res.Error, failed[i] = rsyncv1.Ownership_OWNERSHIP_UNKNOWN, Cause(err), err
				return
			}
			live, err := cl.Get(ctx, gvk, namespace, name)
			switch {
			case isGone(err):
				res.State = rsyncv1.Ownership_OWNERSHIP_FREE
				return
			case err != nil:
				res.State, res.Error, failed[i] = rsyncv1.Ownership_OWNERSHIP_UNKNOWN, Cause(err), err
				return
			}
			switch st, other := standingOf(live, owner, false); st {
			case standingOurs:
				res.State, res.Owner = rsyncv1.Ownership_OWNERSHIP_OWNED, owner
			case standingOther:
				res.State, res.Owner = rsyncv1.Ownership_OWNERSHIP_OTHER_OWNER, other
			default:
				res.State = rsyncv1.Ownership_OWNERSHIP_UNMANAGED
			}
		}()
	}
	wg.Wait()
	for _, err := range failed {
		if errors.Is(err, ErrNamespaced) {
			return nil, errs.Invalid("namespace", "%s is namespaced: give the object's namespace", kind)
		}
	}
	return out, nil
}

// ManagedBy is the owner rsync's record says manages an object on a
// cluster; "" if none.
func (a *api) ManagedBy(provider, cluster, apiVersion, kind, namespace, name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.claimant(clusterKey(provider, cluster), keyOf(apiVersion, kind, namespace, name))
}
