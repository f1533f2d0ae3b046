// Package namespace is the namespace service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package namespace

import (
	"context"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/namespace/internal/namespace"
)

// Name is the program name of the namespace service.
const Name = "namespace"

// Collections are the store collections the namespace service opens on its
// view of the store (Env.StoreFor(Name)): its database user's role needs
// these and no other. docs/store.md's roles and mongosh script are generated
// from them (make generate).
var Collections = namespace.Collections

// Build is the namespace service's app.Build: the store. It holds no
// client of core: core tells it the logical clouds' facts.
func Build(_ context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	st, err := env.StoreFor(Name)
	if err != nil {
		return nil, server.Options{}, err
	}
	svc, err := namespace.New(st, env.Config.PodSecurity, env.Config.TenantEgressCIDRs)
	if err != nil {
		return nil, server.Options{}, err
	}
	return []server.Service{svc, facts.Serve(svc.Facts())}, server.Options{}, nil
}
