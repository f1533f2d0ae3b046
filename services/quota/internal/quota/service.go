// Package quota implements the quota service: the cluster quotas of each
// logical cloud, checked with Kubernetes' own rules for resource names and
// quantities, the default quota of a logical cloud that has none, and the
// ResourceQuota objects applying a logical cloud puts on its clusters. It
// asks core, over gRPC, whether a logical cloud exists before it stores or
// answers anything under it on its public API; its internal API (render,
// purge) never calls core: core sends the namespace and level. It does not
// talk to clusters.
package quota

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/util/validation"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// DefaultName is the name the default quota is shown under.
const DefaultName = "default"

// Service is the quota service's gRPC API.
type Service struct {
	quotav1.UnimplementedQuotaServiceServer
	quotav1.UnimplementedQuotaInternalServiceServer
	quotas       *store.Records[*quotav1.StoredQuota]
	core         corev1.LogicalCloudServiceClient
	defaultQuota []kube.Amount
	maxQuota     []kube.Amount
	// base is what every rendered quota has unless it sets more or less:
	// the default quota, over the maximum.
	base []kube.Amount
}

// New opens the service's collection on st. core answers whether a
// logical cloud exists; defaultQuota (possibly empty: none) applies to a
// logical cloud without a quota of its own, and is what every quota of
// its own is laid over; maxQuota (possibly empty) is what only an admin
// may set more than. A default above the maximum is refused.
func New(st *store.Store, core corev1.LogicalCloudServiceClient, defaultQuota, maxQuota []kube.Amount) (*Service, error) {
	if err := kube.CheckMax("DCM_DEFAULT_QUOTA", defaultQuota, maxQuota, false); err != nil {
		return nil, fmt.Errorf("the default quota must be within DCM_MAX_QUOTA: %w", err)
	}
	return &Service{
		quotas:       store.NewRecords(st, "quotas", "quota", func() *quotav1.StoredQuota { return &quotav1.StoredQuota{} }),
		core:         core,
		defaultQuota: defaultQuota,
		maxQuota:     maxQuota,
		base:         kube.MergeHard(maxQuota, defaultQuota),
	}, nil
}

// Register serves the public and the internal API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	quotav1.RegisterQuotaServiceServer(r, s)
	quotav1.RegisterQuotaInternalServiceServer(r, s)
}

// cloud reads the logical cloud from core: NotFound if it or its project
// is missing or being deleted.
func (s *Service) cloud(ctx context.Context, project, lc string) (*corev1.LogicalCloud, error) {
	resp, err := s.core.GetLogicalCloud(ctx, &corev1.GetLogicalCloudRequest{Project: project, LogicalCloud: lc})
	if err != nil {
		return nil, err
	}
	return resp.GetLogicalCloud(), nil
}

// namespaced reads a logical cloud that has a namespace to put quotas in:
// FailedPrecondition for an admin one, which has none.
func (s *Service) namespaced(ctx context.Context, project, lc string) (*corev1.LogicalCloud, error) {
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	if c.GetSpec().GetLevel() == kube.LevelAdmin {
		return nil, errs.FailedPrecondition("logical cloud %q is an admin logical cloud: it has no namespace to put a quota in", lc)
	}
	return c, nil
}

// exists is cloud as a CreateChecked check.
func (s *Service) exists(project, lc string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := s.cloud(ctx, project, lc)
		return err
	}
}

// stored checks a quota, and that only an admin goes over the maximum,
// and returns its stored form.
func (s *Service) stored(ctx context.Context, q *quotav1.Quota) (*quotav1.StoredQuota, error) {
	hard, err := kube.ParseHard("quota.spec", q.GetSpec())
	if err != nil {
		return nil, err
	}
	if err := kube.CheckMax("quota.spec", hard, s.maxQuota, server.MayGrant(ctx)); err != nil {
		return nil, err
	}
	out := &quotav1.StoredQuota{Metadata: q.GetMetadata()}
	for _, a := range hard {
		out.Hard = append(out.Hard, &quotav1.ResourceAmount{Resource: a.Resource, Quantity: a.Quantity})
	}
	return out, nil
}

// api is the API form of a stored quota.
func api(q *quotav1.StoredQuota) *quotav1.Quota {
	return &quotav1.Quota{Metadata: q.GetMetadata(), Spec: kube.HardStruct(amounts(q.GetHard()))}
}

// defaultFor is the default quota as shown for a logical cloud, or nil if
// none applies (one of its own exists, no default is configured, or it is
// an admin logical cloud, which has no namespace).
func (s *Service) defaultFor(ctx context.Context, level, parent string) (*quotav1.StoredQuota, error) {
	if len(s.defaultQuota) == 0 || level == kube.LevelAdmin {
		return nil, nil
	}
	own, err := s.quotas.List(ctx, parent)
	if err != nil || len(own) > 0 {
		return nil, err
	}
	q := &quotav1.StoredQuota{Metadata: &typesv1.Metadata{
		Name:        DefaultName,
		Description: "the default quota: applies while the logical cloud has no quota of its own (DCM_DEFAULT_QUOTA)",
	}}
	for _, a := range s.defaultQuota {
		q.Hard = append(q.Hard, &quotav1.ResourceAmount{Resource: a.Resource, Quantity: a.Quantity})
	}
	return q, nil
}

// CreateQuota implements quotav1.QuotaServiceServer.
func (s *Service) CreateQuota(ctx context.Context, req *quotav1.CreateQuotaRequest) (*quotav1.CreateQuotaResponse, error) {
	q, err := s.stored(ctx, req.GetQuota())
	if err != nil {
		return nil, err
	}
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if _, err := s.namespaced(ctx, project, lc); err != nil {
		return nil, err
	}
	parent := store.Key(project, lc)
	err = s.quotas.CreateChecked(ctx, store.Key(parent, q.GetMetadata().GetName()), parent, q, s.exists(project, lc))
	if err != nil {
		return nil, err
	}
	return &quotav1.CreateQuotaResponse{Quota: api(q)}, nil
}

// GetQuota implements quotav1.QuotaServiceServer.
func (s *Service) GetQuota(ctx context.Context, req *quotav1.GetQuotaRequest) (*quotav1.GetQuotaResponse, error) {
	c, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	parent := store.Key(req.GetProject(), req.GetLogicalCloud())
	q, err := s.quotas.Get(ctx, store.Key(parent, req.GetName()))
	if err == nil {
		return &quotav1.GetQuotaResponse{Quota: api(q.Msg)}, nil
	}
	if errs.Code(err) != codes.NotFound || req.GetName() != DefaultName {
		return nil, err
	}
	d, derr := s.defaultFor(ctx, c.GetSpec().GetLevel(), parent)
	switch {
	case derr != nil:
		return nil, derr
	case d == nil:
		return nil, err
	}
	return &quotav1.GetQuotaResponse{Quota: api(d)}, nil
}

// effective reads the quotas that apply to a logical cloud: its own,
// ordered by name, or else the default one.
func (s *Service) effective(ctx context.Context, level, parent string) ([]*quotav1.StoredQuota, error) {
	qs, err := s.quotas.List(ctx, parent)
	if err != nil || len(qs) > 0 {
		return qs, err
	}
	d, err := s.defaultFor(ctx, level, parent)
	if err != nil || d == nil {
		return qs, err
	}
	return []*quotav1.StoredQuota{d}, nil
}

// ListQuotas implements quotav1.QuotaServiceServer.
func (s *Service) ListQuotas(ctx context.Context, req *quotav1.ListQuotasRequest) (*quotav1.ListQuotasResponse, error) {
	c, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	// A page of the logical cloud's own quotas; the default one stands in
	// for them on the first page when there are none (as effective).
	parent := store.Key(req.GetProject(), req.GetLogicalCloud())
	qs, next, err := s.quotas.ListPage(ctx, parent, store.PageOf(req))
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 && req.GetPageToken() == "" {
		d, err := s.defaultFor(ctx, c.GetSpec().GetLevel(), parent)
		if err != nil {
			return nil, err
		}
		if d != nil {
			qs = append(qs, d)
		}
	}
	out := &quotav1.ListQuotasResponse{Quotas: make([]*quotav1.Quota, 0, len(qs)), NextPageToken: next}
	for _, q := range qs {
		out.Quotas = append(out.Quotas, api(q))
	}
	return out, nil
}

// UpdateQuota implements quotav1.QuotaServiceServer. Updating the default
// quota of a logical cloud stores it as that logical cloud's own.
func (s *Service) UpdateQuota(ctx context.Context, req *quotav1.UpdateQuotaRequest) (*quotav1.UpdateQuotaResponse, error) {
	if n := req.GetQuota().GetMetadata().GetName(); n != req.GetName() {
		return nil, errs.Invalid("quota.metadata.name", "must equal the quota in the path (%q), got %q", req.GetName(), n)
	}
	q, err := s.stored(ctx, req.GetQuota())
	if err != nil {
		return nil, err
	}
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	parent := store.Key(project, lc)
	id := store.Key(parent, req.GetName())
	_, err = s.quotas.Modify(ctx, id, func(cur *quotav1.StoredQuota) error {
		cur.Metadata, cur.Hard = q.GetMetadata(), q.GetHard()
		return nil
	})
	if errs.Code(err) == codes.NotFound && req.GetName() == DefaultName {
		d, derr := s.defaultFor(ctx, c.GetSpec().GetLevel(), parent)
		if derr != nil {
			return nil, derr
		}
		if d != nil {
			err = s.quotas.CreateChecked(ctx, id, parent, q, s.exists(project, lc))
		}
	}
	if err != nil {
		return nil, err
	}
	return &quotav1.UpdateQuotaResponse{Quota: api(q)}, nil
}

// DeleteQuota implements quotav1.QuotaServiceServer.
func (s *Service) DeleteQuota(ctx context.Context, req *quotav1.DeleteQuotaRequest) (*quotav1.DeleteQuotaResponse, error) {
	c, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	parent := store.Key(req.GetProject(), req.GetLogicalCloud())
	err = s.quotas.Delete(ctx, store.Key(parent, req.GetName()))
	if errs.Code(err) == codes.NotFound && req.GetName() == DefaultName {
		if d, derr := s.defaultFor(ctx, c.GetSpec().GetLevel(), parent); derr != nil || d != nil {
			return nil, errors.Join(derr, errs.FailedPrecondition("the default quota applies while the logical cloud has no quota of its own; add one to replace it"))
		}
	}
	if err != nil {
		return nil, err
	}
	return &quotav1.DeleteQuotaResponse{}, nil
}

// RenderQuotas implements quotav1.QuotaInternalServiceServer: the quotas
// ListQuotas shows, each a ResourceQuota of the same name in the logical
// cloud's namespace, laid over the default quota (and the maximum, for
// resources the default does not set): a quota that leaves a resource
// out, or is empty, still bounds it on a shared cluster. The namespace and
// level are core's, sent in the request: it never calls core.
func (s *Service) RenderQuotas(ctx context.Context, req *quotav1.RenderQuotasRequest) (*quotav1.RenderQuotasResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if req.GetLevel() == kube.LevelAdmin || req.GetNamespace() == "" {
		return nil, errs.FailedPrecondition("logical cloud %q is an admin logical cloud: it has no namespace to put a quota in", lc)
	}
	// Core checked the name when it stored the logical cloud; a request
	// that did not come from there gets a clear refusal, not quotas every
	// cluster refuses on every apply.
	ns := req.GetNamespace()
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return nil, errs.Invalid("namespace", "%q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
	}
	qs, err := s.effective(ctx, req.GetLevel(), store.Key(project, lc))
	if err != nil {
		return nil, err
	}
	out := &quotav1.RenderQuotasResponse{Namespace: ns, Manifests: []string{}, Names: []string{}}
	for _, q := range qs {
		name := q.GetMetadata().GetName()
		out.Manifests = append(out.Manifests, resourceQuota(name, ns, kube.Labels(project, lc), kube.MergeHard(s.base, amounts(q.GetHard()))))
		out.Names = append(out.Names, name)
	}
	return out, nil
}

func amounts(hard []*quotav1.ResourceAmount) []kube.Amount {
	out := make([]kube.Amount, 0, len(hard))
	for _, a := range hard {
		out = append(out, kube.Amount{Resource: a.GetResource(), Quantity: a.GetQuantity()})
	}
	return out
}

// resourceQuota renders a quota as a ResourceQuota object.
func resourceQuota(name, namespace string, labels map[string]string, hard []kube.Amount) string {
	h := make(map[string]string, len(hard))
	for _, a := range hard {
		h[a.Resource] = a.Quantity
	}
	return kube.Manifest("v1", "ResourceQuota", kube.Meta{Name: name, Namespace: namespace, Labels: labels},
		map[string]any{"spec": map[string]any{"hard": h}})
}

// PurgeLogicalCloud implements quotav1.QuotaInternalServiceServer.
func (s *Service) PurgeLogicalCloud(ctx context.Context, req *quotav1.PurgeLogicalCloudRequest) (*quotav1.PurgeLogicalCloudResponse, error) {
	n, err := s.quotas.DeleteUnder(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()))
	if err != nil {
		return nil, err
	}
	return &quotav1.PurgeLogicalCloudResponse{Removed: n}, nil
}
