package servicemesh

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Internal is the service mesh service's internal API (callers: core).
type Internal struct {
	servicemeshv1.UnimplementedServiceMeshInternalServiceServer
	s *Service
}

// Register serves the internal API on r.
func (in *Internal) Register(r grpc.ServiceRegistrar) {
	servicemeshv1.RegisterServiceMeshInternalServiceServer(r, in)
}

// RenderControlPlanes implements servicemeshv1.ServiceMeshInternalServiceServer.
func (in *Internal) RenderControlPlanes(ctx context.Context, req *servicemeshv1.RenderControlPlanesRequest) (*servicemeshv1.RenderControlPlanesResponse, error) {
	_, err := in.s.planes.Get(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()))
	switch {
	case errs.Code(err) == codes.NotFound && !req.GetEnabled():
		return &servicemeshv1.RenderControlPlanesResponse{Enabled: false}, nil
	case err != nil && errs.Code(err) != codes.NotFound:
		return nil, err
	}
	return nil, status.Error(codes.Unimplemented, "rendering a service mesh is not built yet")
}

// ReleaseControlPlanes implements servicemeshv1.ServiceMeshInternalServiceServer.
func (in *Internal) ReleaseControlPlanes(context.Context, *servicemeshv1.ReleaseControlPlanesRequest) (*servicemeshv1.ReleaseControlPlanesResponse, error) {
	return &servicemeshv1.ReleaseControlPlanesResponse{}, nil
}

// PurgeLogicalCloud implements servicemeshv1.ServiceMeshInternalServiceServer.
func (in *Internal) PurgeLogicalCloud(ctx context.Context, req *servicemeshv1.PurgeLogicalCloudRequest) (*servicemeshv1.PurgeLogicalCloudResponse, error) {
	if err := in.s.planes.Delete(ctx, store.Key(req.GetProject(), req.GetLogicalCloud())); err != nil && errs.Code(err) != codes.NotFound {
		return nil, err
	}
	return &servicemeshv1.PurgeLogicalCloudResponse{}, nil
}
