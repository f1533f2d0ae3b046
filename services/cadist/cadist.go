// Package cadist is the CA distribution service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package cadist

import (
	"context"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/cadist/internal/cadist"
)

// Name is the program name of the CA distribution service.
const Name = "cadist"

// Collections are the store collections the CA distribution service opens on
// its view of the store (Env.StoreFor(Name)): its database user's role needs
// these and no other. docs/store.md's roles and mongosh script are generated
// from them (make generate).
var Collections = cadist.Collections

// Build is the CA distribution service's app.Build: it needs the store
// only, and runs the root generator beside its servers.
func Build(_ context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	st, err := env.StoreFor(Name)
	if err != nil {
		return nil, server.Options{}, err
	}
	svc := cadist.New(st, cadist.Options{
		IntermediateLifetime: env.Config.CAIntermediateLifetime,
		Overlap:              env.Config.CAOverlap,
		RevokedRetention:     env.Config.CARevokedRetention,
		Log:                  env.Log.Named("roots"),
	})
	return []server.Service{svc}, server.Options{Background: []func(context.Context) error{svc.Run}}, nil
}
