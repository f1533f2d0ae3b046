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

// Service is the resource synchronizer's gRPC API: the composition of its
// parts, each a type holding only what it uses, whose methods are the
// RPCs: the cluster registry (registry: providers.go, clusters.go,
// holds.go), the rollouts (rollouts: rollouts.go, the engine's API) and
// the read-backs from clusters (readbacks: readbacks.go,
// certificates.go).
type Service struct {
	*registry
	*rollouts
	*readbacks
	unimplemented
	engine *engine.Engine
	// prober probes the clusters of this replica's shards (health.go);
	// nil until ProbeClusters.
	prober *engine.Health
}

// unimplemented answers the RPCs no part implements. It is embedded a
// level deeper than the parts, so that their methods win.
type unimplemented struct {
	rsyncv1.UnimplementedRsyncServiceServer
	rsyncv1.UnimplementedRsyncInternalServiceServer
}

// registry is the cluster registry: providers, clusters (whose admin
// kubeconfigs are sealed at rest and never returned) and the holds of
// owners on clusters.
type registry struct {
	providers *store.Records[*rsyncv1.ClusterProvider]
	clusters  *store.Records[*rsyncv1.Cluster]
	// holds is rsync's own record of which owners hold which cluster
	// (HoldCluster): DeleteCluster decides from it, never asking core.
	holds *store.Records[*rsyncv1.StoredHold]
	// changes wakes the cluster watches (WatchClusters, registry.go) at a
	// change made through this replica.
	changes *registryChanges
	// RegistryPoll is how often a cluster watch reads the registry for
	// other replicas' changes (DefaultRegistryPoll when 0).
	RegistryPoll time.Duration
	// health reads the clusters' probe results (health.go).
	health *healthView
}

// rollouts serves the rollouts through the engine.
type rollouts struct {
	engine *engine.Engine
	health *healthView
}

// readbacks reads what registered clusters hold (issued and renewed
// certificates, quota usage, ServiceAccount tokens, connection info, who
// owns an object) through their clients.
type readbacks struct {
	clusters  *store.Records[*rsyncv1.Cluster]
	connector *connector
	engine    *engine.Engine
	renewed   renewals
	log       *zap.Logger
}

// New opens the service's collections on st and makes the engine (Run
// starts it). It calls no other service.
func New(st *store.Store, cfg engine.Config, log *zap.Logger) *Service {
	reg := &registry{
		changes: newRegistryChanges(),
		providers: store.NewRecords(st, ProvidersCollection, "cluster provider",
			func() *rsyncv1.ClusterProvider { return &rsyncv1.ClusterProvider{} }),
		clusters: store.NewRecords(st, ClustersCollection, "cluster", func() *rsyncv1.Cluster { return &rsyncv1.Cluster{} }),
		holds:    store.NewRecords(st, HoldsCollection, "cluster hold", func() *rsyncv1.StoredHold { return &rsyncv1.StoredHold{} }),
	}
	reg.health = &healthView{records: engine.HealthRecords(st)}
	conn := &connector{clusters: reg.clusters, cache: map[string]cachedClient{}}
	eng := engine.New(st, conn, cfg, log)
	return &Service{
		registry:  reg,
		rollouts:  &rollouts{engine: eng, health: reg.health},
		readbacks: &readbacks{clusters: reg.clusters, connector: conn, engine: eng, log: log},
		engine:    eng,
	}
}

// Run runs the engine, and the cluster probes if ProbeClusters set them
// up, until ctx ends (a server background loop).
func (s *Service) Run(ctx context.Context) error {
	if s.prober == nil {
		return s.engine.Run(ctx)
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		_ = s.prober.Run(pctx)
		close(done)
	}()
	err := s.engine.Run(ctx)
	cancel()
	<-done
	return err
}

// Register serves the public and the internal API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	rsyncv1.RegisterRsyncServiceServer(r, s)
	rsyncv1.RegisterRsyncInternalServiceServer(r, s)
}
