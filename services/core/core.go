// Package core is the core service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package core

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	factsv1 "github.com/dcm-project/dcm/gen/dcm/facts/v1"
	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/core/internal/core"
)

// Name is the program name of the core service.
const Name = "core"

// Collections are the store collections the core service opens on its view
// of the store (Env.StoreFor(Name)): its database user's role needs these
// and no other. docs/store.md's roles and mongosh script are generated from
// them (make generate).
var Collections = core.Collections

// Build is the core service's app.Build: projects, logical clouds and the
// token service, on the store, with clients of the services a logical
// cloud spans and the loop that finishes interrupted deletions.
func Build(ctx context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	st, err := env.StoreFor(Name)
	if err != nil {
		return nil, server.Options{}, err
	}
	cfg := env.Config
	conns, closeAll, err := env.DialPeers(cfg.NamespaceAddr, cfg.UserAddr, cfg.QuotaAddr, cfg.RsyncAddr, cfg.ServiceMeshAddr, cfg.CADistAddr, cfg.TrafficAddr)
	if err != nil {
		return nil, server.Options{}, err
	}
	peers := core.Peers{
		Namespaces:      namespacev1.NewNamespaceInternalServiceClient(conns[0]),
		Users:           userv1.NewUserServiceClient(conns[1]),
		UsersInternal:   userv1.NewUserInternalServiceClient(conns[1]),
		Quotas:          quotav1.NewQuotaServiceClient(conns[2]),
		QuotasInternal:  quotav1.NewQuotaInternalServiceClient(conns[2]),
		Rsync:           rsyncv1.NewRsyncServiceClient(conns[3]),
		RsyncInternal:   rsyncv1.NewRsyncInternalServiceClient(conns[3]),
		MeshInternal:    servicemeshv1.NewServiceMeshInternalServiceClient(conns[4]),
		CaDistInternal:  cadistv1.NewCaDistInternalServiceClient(conns[5]),
		Mesh:            servicemeshv1.NewServiceMeshServiceClient(conns[4]),
		Traffic:         trafficv1.NewTrafficServiceClient(conns[6]),
		TrafficInternal: trafficv1.NewTrafficInternalServiceClient(conns[6]),
		Facts: factsPeers(cfg, []factsAt{{"namespace", cfg.NamespaceAddr, conns[0]}, {"user", cfg.UserAddr, conns[1]},
			{"quota", cfg.QuotaAddr, conns[2]}, {"traffic", cfg.TrafficAddr, conns[6]}}),
	}
	tenancy, err := core.NewTenancy(cfg.ReservedNamespaces, cfg.MaxQuota, cfg.PodSecurity)
	if err != nil {
		closeAll(context.Background())
		return nil, server.Options{}, err
	}
	if l := cfg.TokenLifetime; l != 0 && (l < 10*time.Minute || l > 30*24*time.Hour) {
		closeAll(context.Background())
		return nil, server.Options{}, fmt.Errorf("DCM_TOKEN_LIFETIME %s: must be from 10m to 720h", l)
	}
	if p := cfg.CertRenewPercent; p < 1 || p > 99 {
		closeAll(context.Background())
		return nil, server.Options{}, fmt.Errorf("DCM_CERT_RENEW_PERCENT %d: must be from 1 to 99", p)
	}
	if cfg.MaxMeshesPerProject < 0 {
		closeAll(context.Background())
		return nil, server.Options{}, fmt.Errorf("DCM_MAX_MESHES_PER_PROJECT %d: must be 0 (no maximum) or more", cfg.MaxMeshesPerProject)
	}
	sets := core.NewClusterSets(st, peers.Rsync, peers.RsyncInternal, cfg.DefaultClusterSet, env.Log.Named("cluster-sets"))
	// The default cluster set is there before the first request is
	// served (a reference made right after start needs its binding).
	if err := sets.EnsureDefault(ctx); err != nil {
		closeAll(context.Background())
		return nil, server.Options{}, fmt.Errorf("make the default cluster set %q (DCM_DEFAULT_CLUSTER_SET): %w", cfg.DefaultClusterSet, err)
	}
	clouds := core.NewLogicalClouds(st, peers, core.Settings{Tenancy: tenancy, TokenLifetime: cfg.TokenLifetime,
		CertRenewPercent: cfg.CertRenewPercent, WatchMax: cfg.WatchMax, MaxMeshes: cfg.MaxMeshesPerProject, ClusterSets: sets}, env.Log.Named("logical-clouds"))
	return []server.Service{core.NewProjects(st, sets), clouds, core.NewTrafficRollouts(clouds), core.NewTokens(st)}, server.Options{
		Background: []func(context.Context) error{clouds.Cleanup(cfg.CleanupInterval), clouds.HoldReferences(cfg.CleanupInterval),
			clouds.Reconcile(cfg.FactsInterval), clouds.FollowLabels(cfg.LabelsInterval), clouds.Peers.Reconcile(cfg.MeshPeersInterval)},
		OnStop: []func(context.Context){closeAll, core.CountLogicalClouds(st, peers.RsyncInternal)}, // dcm_logical_clouds until the program stops
	}, nil
}

// factsAt is a service core tells the facts, where it is reached.
type factsAt struct {
	name, addr string
	conn       *grpc.ClientConn
}

// factsPeers are the programs serving the facts contract for services, one
// per address: services served by one program (the all-in-one program)
// share one registration of the contract there, which tells each of their
// copies, so core calls it once.
func factsPeers(cfg server.Config, services []factsAt) []core.FactsPeer {
	var out []core.FactsPeer
	at := map[string]int{}
	for _, s := range services {
		addr := cfg.Peer(s.addr)
		if i, ok := at[addr]; ok {
			out[i].Name = strings.TrimSuffix(out[i].Name, " service") + "/" + s.name + " service"
			continue
		}
		at[addr] = len(out)
		out = append(out, core.FactsPeer{Name: s.name + " service", Client: factsv1.NewLogicalCloudFactsInternalServiceClient(s.conn)})
	}
	return out
}
