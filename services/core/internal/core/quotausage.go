package core

import (
	"context"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// quotaReads bounds the clusters read at once for quota usage.
const quotaReads = 16

// QuotaUsage is the usage of a logical cloud's quotas on its clusters.
type QuotaUsage struct {
	*cloudReader
	*rollouts
	rsync rsyncv1.RsyncInternalServiceClient
}

// GetQuotaUsage implements corev1.LogicalCloudServiceServer: each of the
// logical cloud's ResourceQuotas as each of its clusters reports it, and
// the sums per resource. The quotas are those applied, not those desired:
// the ResourceQuotas of rsync's status for each cluster (a quota added
// since the last apply or update is not there yet; one removed since is
// still there). A cluster that cannot be read is reported with its error
// and left out of the sums; the others are still shown.
func (s *QuotaUsage) GetQuotaUsage(ctx context.Context, req *corev1.GetQuotaUsageRequest) (*corev1.GetQuotaUsageResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	if c.GetSpec().GetLevel() == levelAdmin {
		return nil, errs.FailedPrecondition("logical cloud %q is an admin logical cloud: it has no quotas", lc)
	}
	if err := s.requireApplied(ctx, project, lc, c, "its quotas are"); err != nil {
		return nil, err
	}
	rs, err := s.rsync.GetRolloutStatus(ctx, &rsyncv1.GetRolloutStatusRequest{Owner: rolloutOwner(project, lc)})
	if err != nil {
		return nil, err
	}
	// A cluster the rollout is emptying (dropped by an update) has no
	// quota applied any more: it is left out.
	var clusters []*rsyncv1.RolloutClusterStatus
	for _, cl := range rs.GetStatus().GetClusters() {
		if len(appliedQuotas(cl)) > 0 {
			clusters = append(clusters, cl)
		}
	}
	usage := &corev1.QuotaUsage{Clusters: make([]*corev1.ClusterQuotaUsage, len(clusters))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(quotaReads)
	for i, cl := range clusters {
		g.Go(func() error {
			usage.Clusters[i] = s.clusterQuotaUsage(gctx, target{provider: cl.GetProvider(), cluster: cl.GetCluster()}, appliedQuotas(cl))
			return nil
		})
	}
	_ = g.Wait() // each cluster's error is in its entry
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	usage.Total = sumQuotas(usage.GetClusters())
	return &corev1.GetQuotaUsageResponse{Usage: usage}, nil
}

// appliedQuotas are the ResourceQuotas the logical cloud's rollout has on
// one cluster (its last apply or update), in rollout order.
func appliedQuotas(cl *rsyncv1.RolloutClusterStatus) []*rsyncv1.ResourceStatus {
	var out []*rsyncv1.ResourceStatus
	for _, r := range cl.GetResources() {
		if r.GetKind() == "ResourceQuota" && r.GetOperation() == rsyncv1.Operation_OPERATION_APPLY {
			out = append(out, r)
		}
	}
	return out
}

// clusterQuotaUsage reads the given ResourceQuotas on one cluster; the
// first failure stops it and is reported in the entry.
func (s *QuotaUsage) clusterQuotaUsage(ctx context.Context, t target, quotas []*rsyncv1.ResourceStatus) *corev1.ClusterQuotaUsage {
	out := &corev1.ClusterQuotaUsage{ClusterProvider: t.provider, ClusterName: t.cluster}
	for _, q := range quotas {
		resp, err := s.rsync.GetResourceQuotaStatus(ctx, &rsyncv1.GetResourceQuotaStatusRequest{
			Provider: t.provider, Cluster: t.cluster, Namespace: q.GetNamespace(), Name: q.GetName()})
		if err != nil {
			out.Quotas, out.Error = nil, errs.ToStatus(err).Message()
			return out
		}
		out.Quotas = append(out.Quotas, &corev1.NamedQuotaUsage{Name: q.GetName(), Hard: amounts(resp.GetHard()), Used: amounts(resp.GetUsed())})
	}
	return out
}

func amounts(list []*rsyncv1.ResourceQuantity) map[string]string {
	out := make(map[string]string, len(list))
	for _, q := range list {
		out[q.GetResource()] = q.GetQuantity()
	}
	return out
}

// sumQuotas adds up hard and used per resource over the clusters read.
func sumQuotas(clusters []*corev1.ClusterQuotaUsage) *corev1.QuotaAmounts {
	hard, used := map[string]resource.Quantity{}, map[string]resource.Quantity{}
	add := func(into map[string]resource.Quantity, from map[string]string) {
		for name, v := range from {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				continue // the cluster wrote it; it always parses
			}
			sum := into[name]
			sum.Add(q)
			into[name] = sum
		}
	}
	for _, c := range clusters {
		for _, q := range c.GetQuotas() {
			add(hard, q.GetHard())
			add(used, q.GetUsed())
		}
	}
	text := func(m map[string]resource.Quantity) map[string]string {
		out := make(map[string]string, len(m))
		for name, q := range m {
			out[name] = q.String()
		}
		return out
	}
	return &corev1.QuotaAmounts{Hard: text(hard), Used: text(used)}
}
