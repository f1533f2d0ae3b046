// Package rsync is the resource synchronizer service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package rsync

import (
	"context"
	"slices"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
	"github.com/dcm-project/dcm/services/rsync/internal/rsync"
)

// Name is the program name of the resource synchronizer service.
const Name = "rsync"

// Collections are the store collections the resource synchronizer service
// opens on its view of the store (Env.StoreFor(Name)): its database user's
// role needs these and no other. docs/store.md's roles and mongosh script
// are generated from them (make generate).
var Collections = slices.Concat(rsync.Collections, engine.Collections)

// Build is the resource synchronizer's app.Build: the store and the engine
// as a background loop. It dials no other service: services below core
// never call up (docs/conventions.md).
func Build(_ context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	st, err := env.StoreFor(Name)
	if err != nil {
		return nil, server.Options{}, err
	}
	cfg := env.Config
	replica := cfg.RsyncReplica
	if replica == "" && st.Embedded() != nil {
		// One program per embedded store (its directory is locked): a
		// restart takes the shards back at once.
		replica = "embedded"
	}
	s := rsync.New(st, engine.Config{
		Concurrency: cfg.RsyncConcurrency, RetryBase: cfg.RsyncRetryBase, RetryMax: cfg.RsyncRetryMax,
		ForceConflicts: cfg.RsyncForceConflicts,
		Replica:        replica, Shards: cfg.RsyncShards, LeaseTTL: cfg.RsyncLeaseTTL,
	}, env.Log.Named("engine"))
	s.ProbeClusters(engine.HealthConfig{Interval: cfg.ClusterProbeInterval, Concurrency: cfg.ClusterProbeConcurrency}, env.Log.Named("health"))
	return []server.Service{s}, server.Options{
		Background: []func(context.Context) error{s.Run},
		// SubmitRollout repeats each cluster's manifests: a mesh-enabled
		// logical cloud's control plane is ~160 KB per cluster.
		MaxRecvMsgSize: client.MaxRecvMsgSize,
	}, nil
}
