// Package rsync implements the resource synchronizer's API: the cluster
// registry (providers and clusters, whose admin kubeconfigs are sealed at
// rest and never returned), rollouts that the engine applies to registered
// clusters, and read-backs of what clusters hold (issued certificates,
// quota usage, connection info, who owns an object) and ServiceAccount
// tokens from their TokenRequest API.
package rsync

import (
	"context"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// Service is the resource synchronizer's gRPC API.
type Service struct {
	rsyncv1.UnimplementedRsyncServiceServer
	providers *store.Records[*rsyncv1.ClusterProvider]
	clusters  *store.Records[*rsyncv1.Cluster]
	core      corev1.LogicalCloudServiceClient
	engine    *engine.Engine
	connector *connector
	renewed   renewals
	log       *zap.Logger
}

// New opens the service's collections on st and makes the engine (Run
// starts it); core answers which logical clouds reference a cluster.
func New(st *store.Store, core corev1.LogicalCloudServiceClient, cfg engine.Config, log *zap.Logger) *Service {
	s := &Service{
		core: core,
		log:  log,
		providers: store.NewRecords(st, "cluster_providers", "cluster provider",
			func() *rsyncv1.ClusterProvider { return &rsyncv1.ClusterProvider{} }),
		clusters: store.NewRecords(st, "clusters", "cluster", func() *rsyncv1.Cluster { return &rsyncv1.Cluster{} }),
	}
	s.connector = &connector{s: s, cache: map[string]cachedClient{}}
	s.engine = engine.New(st, s.connector, cfg, log)
	return s
}

// Run runs the engine until ctx ends (a server background loop).
func (s *Service) Run(ctx context.Context) error { return s.engine.Run(ctx) }

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

// UpdateClusterProvider implements rsyncv1.RsyncServiceServer. The name is
// the record's identity: a body naming another provider is refused.
func (s *Service) UpdateClusterProvider(ctx context.Context, req *rsyncv1.UpdateClusterProviderRequest) (*rsyncv1.UpdateClusterProviderResponse, error) {
	in := req.GetClusterProvider()
	if n := in.GetMetadata().GetName(); n != req.GetName() {
		return nil, errs.Invalid("cluster_provider.metadata.name", "must equal the cluster provider in the path (%q), got %q", req.GetName(), n)
	}
	p, err := s.providers.Modify(ctx, req.GetName(), func(p *rsyncv1.ClusterProvider) error {
		p.Metadata = in.GetMetadata()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &rsyncv1.UpdateClusterProviderResponse{ClusterProvider: p}, nil
}

// DeleteClusterProvider implements rsyncv1.RsyncServiceServer. A provider
// with clusters is refused: delete them first.
func (s *Service) DeleteClusterProvider(ctx context.Context, req *rsyncv1.DeleteClusterProviderRequest) (*rsyncv1.DeleteClusterProviderResponse, error) {
	cs, err := s.clusters.List(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	if len(cs) > 0 {
		return nil, errs.FailedPrecondition("cluster provider %q still has %d clusters: delete them first", req.GetName(), len(cs))
	}
	if err := s.providers.Delete(ctx, req.GetName()); err != nil {
		return nil, err
	}
	return &rsyncv1.DeleteClusterProviderResponse{}, nil
}
