// Package rsync implements the resource synchronizer. This version holds
// the cluster registry's providers; applying resources to clusters comes
// with the synchronizer engine.
package rsync

import (
	"context"

	"google.golang.org/grpc"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/store"
)

// Service is the resource synchronizer's gRPC API.
type Service struct {
	rsyncv1.UnimplementedRsyncServiceServer
	providers *store.Records[*rsyncv1.ClusterProvider]
}

// New opens the service's collections on st.
func New(st *store.Store) *Service {
	return &Service{providers: store.NewRecords(st, "cluster_providers", "cluster provider",
		func() *rsyncv1.ClusterProvider { return &rsyncv1.ClusterProvider{} })}
}

// Register serves the API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) { rsyncv1.RegisterRsyncServiceServer(r, s) }

// CreateClusterProvider implements rsyncv1.RsyncServiceServer.
func (s *Service) CreateClusterProvider(ctx context.Context, req *rsyncv1.CreateClusterProviderRequest) (*rsyncv1.CreateClusterProviderResponse, error) {
	p := req.GetClusterProvider()
	if err := s.providers.Create(ctx, p.GetMetadata().GetName(), "", p); err != nil {
		return nil, err
	}
	return &rsyncv1.CreateClusterProviderResponse{ClusterProvider: p}, nil
}

// GetClusterProvider implements rsyncv1.RsyncServiceServer.
func (s *Service) GetClusterProvider(ctx context.Context, req *rsyncv1.GetClusterProviderRequest) (*rsyncv1.GetClusterProviderResponse, error) {
	p, err := s.providers.Get(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.GetClusterProviderResponse{ClusterProvider: p.Msg}, nil
}

// ListClusterProviders implements rsyncv1.RsyncServiceServer.
func (s *Service) ListClusterProviders(ctx context.Context, _ *rsyncv1.ListClusterProvidersRequest) (*rsyncv1.ListClusterProvidersResponse, error) {
	ps, err := s.providers.List(ctx, "")
	if err != nil {
		return nil, err
	}
	return &rsyncv1.ListClusterProvidersResponse{ClusterProviders: ps}, nil
}

// DeleteClusterProvider implements rsyncv1.RsyncServiceServer.
func (s *Service) DeleteClusterProvider(ctx context.Context, req *rsyncv1.DeleteClusterProviderRequest) (*rsyncv1.DeleteClusterProviderResponse, error) {
	if err := s.providers.Delete(ctx, req.GetName()); err != nil {
		return nil, err
	}
	return &rsyncv1.DeleteClusterProviderResponse{}, nil
}
