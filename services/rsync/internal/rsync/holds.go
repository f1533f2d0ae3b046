package rsync

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Who holds a cluster is rsync's own record: core tells it (HoldCluster
// when a logical cloud references a cluster, ReleaseClusters when the
// reference or the logical cloud goes), and DeleteCluster decides from it
// without calling core. A hold is a child of
// its cluster: inserted, then the cluster is checked (CreateChecked), the
// same pair as every other child record (docs/logical-clouds.md, "No
// orphans").

// HoldCluster implements rsyncv1.RsyncInternalServiceServer.
func (rg *registry) HoldCluster(ctx context.Context, req *rsyncv1.HoldClusterRequest) (*rsyncv1.HoldClusterResponse, error) {
	cluster := store.Key(req.GetProvider(), req.GetCluster())
	hold := &rsyncv1.StoredHold{Owner: req.GetOwner(), Provider: req.GetProvider(), Cluster: req.GetCluster()}
	err := rg.holds.CreateChecked(ctx, store.Key(cluster, req.GetOwner()), cluster, hold, func(ctx context.Context) error {
		_, err := rg.clusters.Get(ctx, cluster)
		return err
	})
	if errs.Code(err) == codes.AlreadyExists {
		// Held already: check the cluster is still there, as a new hold would.
		if _, err := rg.clusters.Get(ctx, cluster); err != nil {
			return nil, err
		}
		return &rsyncv1.HoldClusterResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	return &rsyncv1.HoldClusterResponse{}, nil
}

// ReleaseClusters implements rsyncv1.RsyncInternalServiceServer.
func (rg *registry) ReleaseClusters(ctx context.Context, req *rsyncv1.ReleaseClustersRequest) (*rsyncv1.ReleaseClustersResponse, error) {
	if req.GetProvider() != "" || req.GetCluster() != "" {
		err := rg.holds.Delete(ctx, store.Key(req.GetProvider(), req.GetCluster(), req.GetOwner()))
		switch {
		case err == nil:
			return &rsyncv1.ReleaseClustersResponse{Removed: 1}, nil
		case errs.Code(err) == codes.NotFound:
			return &rsyncv1.ReleaseClustersResponse{}, nil
		default:
			return nil, err
		}
	}
	held, err := rg.holds.Match(ctx, map[string]string{"owner": req.GetOwner()})
	if err != nil {
		return nil, err
	}
	out := &rsyncv1.ReleaseClustersResponse{}
	for _, h := range held {
		err := rg.holds.Delete(ctx, h.ID)
		if err != nil && errs.Code(err) != codes.NotFound {
			return nil, err
		}
		if err == nil {
			out.Removed++
		}
	}
	return out, nil
}

// holders names the logical clouds that hold a cluster ("project/lc"
// for an owner "lc/project/lc"), ordered. A rollout alone does not hold
// its clusters: unregistering a cluster never touches what is on it
// (docs/security.md), and a logical cloud's clusters are its references.
func (rg *registry) holders(ctx context.Context, provider, cluster string) ([]string, error) {
	held, err := rg.holds.List(ctx, store.Key(provider, cluster))
	if err != nil {
		return nil, err
	}
	owners := make([]string, 0, len(held))
	for _, h := range held {
		owners = append(owners, strings.TrimPrefix(h.GetOwner(), "lc/"))
	}
	slices.Sort(owners)
	return owners, nil
}
