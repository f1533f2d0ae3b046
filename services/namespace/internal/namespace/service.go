// Package namespace implements the namespace service: the namespace record
// (name and labels) of each logical cloud. It does not talk to clusters.
package namespace

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/validation"

	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Service is the namespace service's gRPC API.
type Service struct {
	namespacev1.UnimplementedNamespaceServiceServer
	namespaces *store.Records[*namespacev1.Namespace]
}

// New opens the service's collection on st.
func New(st *store.Store) *Service {
	return &Service{namespaces: store.NewRecords(st, "namespaces", "namespace of logical cloud",
		func() *namespacev1.Namespace { return &namespacev1.Namespace{} })}
}

// Register serves the API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) { namespacev1.RegisterNamespaceServiceServer(r, s) }

// CreateNamespace implements namespacev1.NamespaceServiceServer.
func (s *Service) CreateNamespace(ctx context.Context, req *namespacev1.CreateNamespaceRequest) (*namespacev1.CreateNamespaceResponse, error) {
	if err := checkLabels(req.GetNamespace().GetLabels()); err != nil {
		return nil, err
	}
	id := store.Key(req.GetProject(), req.GetLogicalCloud())
	if err := s.namespaces.Create(ctx, id, req.GetProject(), req.GetNamespace()); err != nil {
		return nil, err
	}
	return &namespacev1.CreateNamespaceResponse{Namespace: req.GetNamespace()}, nil
}

// GetNamespace implements namespacev1.NamespaceServiceServer.
func (s *Service) GetNamespace(ctx context.Context, req *namespacev1.GetNamespaceRequest) (*namespacev1.GetNamespaceResponse, error) {
	ns, err := s.namespaces.Get(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()))
	if err != nil {
		return nil, err
	}
	return &namespacev1.GetNamespaceResponse{Namespace: ns.Msg}, nil
}

// DeleteNamespace implements namespacev1.NamespaceServiceServer.
func (s *Service) DeleteNamespace(ctx context.Context, req *namespacev1.DeleteNamespaceRequest) (*namespacev1.DeleteNamespaceResponse, error) {
	if err := s.namespaces.Delete(ctx, store.Key(req.GetProject(), req.GetLogicalCloud())); err != nil {
		return nil, err
	}
	return &namespacev1.DeleteNamespaceResponse{}, nil
}

// checkLabels applies Kubernetes' own label rules, naming the bad entry.
func checkLabels(labels []*namespacev1.Label) error {
	seen := map[string]bool{}
	for i, l := range labels {
		if msgs := validation.IsQualifiedName(l.GetKey()); len(msgs) > 0 {
			return errs.Invalid(fmt.Sprintf("namespace.labels[%d].key", i), "%s", strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(l.GetValue()); len(msgs) > 0 {
			return errs.Invalid(fmt.Sprintf("namespace.labels[%d].value", i), "%s", strings.Join(msgs, "; "))
		}
		if seen[l.GetKey()] {
			return errs.Invalid(fmt.Sprintf("namespace.labels[%d].key", i), "duplicate label key %q", l.GetKey())
		}
		seen[l.GetKey()] = true
	}
	return nil
}
