// Package rsync implements the resource synchronizer's API: the cluster
// registry (providers and clusters, whose admin kubeconfigs are sealed at
// rest and never returned), rollouts that the engine applies to registered
// clusters, and read-backs of what clusters hold (issued certificates,
// quota usage, connection info, who owns an object) and ServiceAccount
// tokens from their TokenRequest API.
package rsync

import (
	"context"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// Service is the resource synchronizer's gRPC API.
type Service struct {
	rsyncv1.UnimplementedRsyncServiceServer
	rsyncv1.UnimplementedRsyncInternalServiceServer
	providers *store.Records[*rsyncv1.ClusterProvider]
	clusters  *store.Records[*rsyncv1.Cluster]
	// holds is rsync's own record of which owners hold which cluster
	// (HoldCluster): DeleteCluster decides from it, never asking core.
	holds     *store.Records[*rsyncv1.StoredHold]
	engine    *engine.Engine
	connector *connector
	renewed   renewals
	log       *zap.Logger
	// registry wakes the cluster watches (WatchClusters) at a change made
	// through this replica.
	registry *registryChanges
	// RegistryPoll is how often a cluster watch reads the registry for
	// other replicas' changes (DefaultRegistryPoll when 0).
	RegistryPoll time.Duration
}

// New opens the service's collections on st and makes the engine (Run
// starts it). It calls no other service.
func New(st *store.Store, cfg engine.Config, log *zap.Logger) *Service {
	s := &Service{
		log:      log,
		registry: newRegistryChanges(),
		providers: store.NewRecords(st, ProvidersCollection, "cluster provider",
			func() *rsyncv1.ClusterProvider { return &rsyncv1.ClusterProvider{} }),
		clusters: store.NewRecords(st, ClustersCollection, "cluster", func() *rsyncv1.Cluster { return &rsyncv1.Cluster{} }),
		holds:    store.NewRecords(st, HoldsCollection, "cluster hold", func() *rsyncv1.StoredHold { return &rsyncv1.StoredHold{} }),
	}
	s.connector = &connector{s: s, cache: map[string]cachedClient{}}
	s.engine = engine.New(st, s.connector, cfg, log)
	return s
}

// Run runs the engine until ctx ends (a server background loop).
func (s *Service) Run(ctx context.Context) error { return s.engine.Run(ctx) }

// Register serves the public and the internal API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	rsyncv1.RegisterRsyncServiceServer(r, s)
	rsyncv1.RegisterRsyncInternalServiceServer(r, s)
}
