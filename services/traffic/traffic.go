// Package traffic is the traffic controller service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package traffic

import (
	"context"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/traffic/internal/traffic"
)

// Name is the program name of the traffic controller service.
const Name = "traffic"

// Build is the traffic controller service's app.Build: the store, and core
// to check that a group's logical cloud exists (its create's parent check).
func Build(_ context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	st, err := env.StoreFor(Name)
	if err != nil {
		return nil, server.Options{}, err
	}
	conns, closeAll, err := env.DialPeers(env.Config.CoreAddr)
	if err != nil {
		return nil, server.Options{}, err
	}
	svc := traffic.New(st, corev1.NewLogicalCloudServiceClient(conns[0]))
	return []server.Service{svc}, server.Options{OnStop: []func(context.Context){closeAll}}, nil
}
