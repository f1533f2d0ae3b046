// Package servicemesh is the service mesh service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package servicemesh

import (
	"context"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/servicemesh/internal/servicemesh"
)

// Name is the program name of the service mesh service.
const Name = "servicemesh"

// Collections are the store collections the service mesh service opens on
// its view of the store (Env.StoreFor(Name)): its database user's role needs
// these and no other. docs/store.md's roles and mongosh script are generated
// from them (make generate).
var Collections = servicemesh.Collections

// Build is the service mesh service's app.Build: the store, and CA
// distribution for each cluster's intermediate. It serves the public API
// and the internal one core calls.
func Build(_ context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	st, err := env.StoreFor(Name)
	if err != nil {
		return nil, server.Options{}, err
	}
	conns, closeAll, err := env.DialPeers(env.Config.CADistAddr)
	if err != nil {
		return nil, server.Options{}, err
	}
	svc := servicemesh.New(st, cadistv1.NewCaDistInternalServiceClient(conns[0]), servicemesh.Options{
		Hub: env.Config.IstioHub, Tag: env.Config.IstioTag, TrustDomainSuffix: env.Config.MeshTrustDomain,
	})
	return []server.Service{svc, svc.Internal()}, server.Options{OnStop: []func(context.Context){closeAll}}, nil
}
