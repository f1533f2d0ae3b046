// Package quota implements the quota service: the cluster quotas of each
// logical cloud, checked with Kubernetes' own rules for resource names and
// quantities.
package quota

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Service is the quota service's gRPC API.
type Service struct {
	quotav1.UnimplementedQuotaServiceServer
	quotas *store.Records[*quotav1.Quota]
}

// New opens the service's collection on st.
func New(st *store.Store) *Service {
	return &Service{quotas: store.NewRecords(st, "quotas", "quota", func() *quotav1.Quota { return &quotav1.Quota{} })}
}

// Register serves the API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) { quotav1.RegisterQuotaServiceServer(r, s) }

// CreateQuota implements quotav1.QuotaServiceServer.
func (s *Service) CreateQuota(ctx context.Context, req *quotav1.CreateQuotaRequest) (*quotav1.CreateQuotaResponse, error) {
	q := req.GetQuota()
	if err := checkHard(q.GetHard()); err != nil {
		return nil, err
	}
	parent := store.Key(req.GetProject(), req.GetLogicalCloud())
	if err := s.quotas.Create(ctx, store.Key(parent, q.GetMetadata().GetName()), parent, q); err != nil {
		return nil, err
	}
	return &quotav1.CreateQuotaResponse{Quota: q}, nil
}

// GetQuota implements quotav1.QuotaServiceServer.
func (s *Service) GetQuota(ctx context.Context, req *quotav1.GetQuotaRequest) (*quotav1.GetQuotaResponse, error) {
	q, err := s.quotas.Get(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName()))
	if err != nil {
		return nil, err
	}
	return &quotav1.GetQuotaResponse{Quota: q.Msg}, nil
}

// ListQuotas implements quotav1.QuotaServiceServer.
func (s *Service) ListQuotas(ctx context.Context, req *quotav1.ListQuotasRequest) (*quotav1.ListQuotasResponse, error) {
	qs, err := s.quotas.List(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()))
	if err != nil {
		return nil, err
	}
	return &quotav1.ListQuotasResponse{Quotas: qs}, nil
}

// DeleteQuota implements quotav1.QuotaServiceServer.
func (s *Service) DeleteQuota(ctx context.Context, req *quotav1.DeleteQuotaRequest) (*quotav1.DeleteQuotaResponse, error) {
	if err := s.quotas.Delete(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName())); err != nil {
		return nil, err
	}
	return &quotav1.DeleteQuotaResponse{}, nil
}

// checkHard applies Kubernetes' rules: each resource is a qualified name
// (cpu, limits.cpu, requests.nvidia.com/gpu) and each amount a quantity.
// Quantities are stored in canonical form.
func checkHard(hard []*quotav1.ResourceAmount) error {
	seen := map[string]bool{}
	for i, a := range hard {
		field := fmt.Sprintf("quota.hard[%d]", i)
		if msgs := validation.IsQualifiedName(a.GetResource()); len(msgs) > 0 {
			return errs.Invalid(field+".resource", "%q: %s", a.GetResource(), strings.Join(msgs, "; "))
		}
		if seen[a.GetResource()] {
			return errs.Invalid(field+".resource", "duplicate resource %q", a.GetResource())
		}
		seen[a.GetResource()] = true
		q, err := resource.ParseQuantity(a.GetQuantity())
		if err != nil {
			return errs.Invalid(field+".quantity", "%q is not a Kubernetes quantity", a.GetQuantity())
		}
		if q.Sign() < 0 {
			return errs.Invalid(field+".quantity", "%q is negative", a.GetQuantity())
		}
		a.Quantity = q.String()
	}
	return nil
}
