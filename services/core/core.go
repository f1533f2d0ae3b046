// Package core is the core service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package core

import (
	"context"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/core/internal/core"
)

// Name is the program name of the core service.
const Name = "core"

// Build is the core service's app.Build: projects and the token service,
// on the store.
func Build(_ context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	return []server.Service{core.New(env.Store), core.NewTokens(env.Store)}, server.Options{}, nil
}
