// Package quota is the quota service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package quota

import (
	"context"
	"fmt"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/quota/internal/quota"
)

// Name is the program name of the quota service.
const Name = "quota"

// Collections are the store collections the quota service opens on its view
// of the store (Env.StoreFor(Name)): its database user's role needs these
// and no other. docs/store.md's roles and mongosh script are generated from
// them (make generate).
var Collections = quota.Collections

// Build is the quota service's app.Build: the store, the default quota
// (DCM_DEFAULT_QUOTA), the maximum (DCM_MAX_QUOTA), the container defaults
// (DCM_CONTAINER_DEFAULT_REQUEST, DCM_CONTAINER_DEFAULT_LIMIT). It holds
// no client of core: core tells it the logical clouds' facts.
func Build(_ context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	def, err := kube.ParseHardText("DCM_DEFAULT_QUOTA", env.Config.DefaultQuota)
	if err != nil {
		return nil, server.Options{}, fmt.Errorf("quota: %w", err)
	}
	maximum, err := kube.ParseHardText("DCM_MAX_QUOTA", env.Config.MaxQuota)
	if err != nil {
		return nil, server.Options{}, fmt.Errorf("quota: %w", err)
	}
	containers, err := quota.ParseDefaults(env.Config.ContainerDefaultRequest, env.Config.ContainerDefaultLimit)
	if err != nil {
		return nil, server.Options{}, fmt.Errorf("quota: %w", err)
	}
	st, err := env.StoreFor(Name)
	if err != nil {
		return nil, server.Options{}, err
	}
	svc, err := quota.New(st, def, maximum, containers)
	if err != nil {
		return nil, server.Options{}, fmt.Errorf("quota: %w", err)
	}
	return []server.Service{svc, facts.Serve(svc.Facts())}, server.Options{}, nil
}
