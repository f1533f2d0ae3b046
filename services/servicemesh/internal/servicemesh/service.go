// Package servicemesh implements the service-mesh service. This version
// holds each logical cloud's control-plane record; rendering Istio comes
// later.
package servicemesh

import (
	"context"

	"google.golang.org/grpc"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	"github.com/dcm-project/dcm/platform/store"
)

// Service is the service-mesh service's gRPC API.
type Service struct {
	servicemeshv1.UnimplementedServiceMeshServiceServer
	planes *store.Records[*servicemeshv1.ControlPlane]
	cadist cadistv1.CaDistInternalServiceClient
}

// New opens the service's collections on st; cadist issues the
// intermediates the control planes sign with.
func New(st *store.Store, cadist cadistv1.CaDistInternalServiceClient) *Service {
	return &Service{
		planes: store.NewRecords(st, "control_planes", "control plane",
			func() *servicemeshv1.ControlPlane { return &servicemeshv1.ControlPlane{} }),
		cadist: cadist,
	}
}

// Register serves the API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	servicemeshv1.RegisterServiceMeshServiceServer(r, s)
}

// Internal is the internal API (ServiceMeshInternalService) over the same
// records.
func (s *Service) Internal() *Internal { return &Internal{s: s} }

// CreateControlPlane implements servicemeshv1.ServiceMeshServiceServer. The
// Istio namespace defaults to "<logical cloud>-istio-system", as the design
// pages name it.
func (s *Service) CreateControlPlane(ctx context.Context, req *servicemeshv1.CreateControlPlaneRequest) (*servicemeshv1.CreateControlPlaneResponse, error) {
	cp := req.GetControlPlane()
	if cp.GetNamespace() == "" {
		cp.Namespace = cp.GetName() + "-istio-system"
	}
	if err := s.planes.Create(ctx, store.Key(req.GetProject(), cp.GetName()), req.GetProject(), cp); err != nil {
		return nil, err
	}
	return &servicemeshv1.CreateControlPlaneResponse{ControlPlane: cp}, nil
}

// GetControlPlane implements servicemeshv1.ServiceMeshServiceServer.
func (s *Service) GetControlPlane(ctx context.Context, req *servicemeshv1.GetControlPlaneRequest) (*servicemeshv1.GetControlPlaneResponse, error) {
	cp, err := s.planes.Get(ctx, store.Key(req.GetProject(), req.GetName()))
	if err != nil {
		return nil, err
	}
	return &servicemeshv1.GetControlPlaneResponse{ControlPlane: cp.Msg}, nil
}

// ListControlPlanes implements servicemeshv1.ServiceMeshServiceServer.
func (s *Service) ListControlPlanes(ctx context.Context, req *servicemeshv1.ListControlPlanesRequest) (*servicemeshv1.ListControlPlanesResponse, error) {
	cps, next, err := s.planes.ListPage(ctx, req.GetProject(), store.PageOf(req))
	if err != nil {
		return nil, err
	}
	return &servicemeshv1.ListControlPlanesResponse{ControlPlanes: cps, NextPageToken: next}, nil
}

// DeleteControlPlane implements servicemeshv1.ServiceMeshServiceServer.
func (s *Service) DeleteControlPlane(ctx context.Context, req *servicemeshv1.DeleteControlPlaneRequest) (*servicemeshv1.DeleteControlPlaneResponse, error) {
	if err := s.planes.Delete(ctx, store.Key(req.GetProject(), req.GetName())); err != nil {
		return nil, err
	}
	return &servicemeshv1.DeleteControlPlaneResponse{}, nil
}
