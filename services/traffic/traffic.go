// Package traffic is the traffic controller service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package traffic

import (
	"context"
	"slices"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/traffic/internal/dns"
	"github.com/dcm-project/dcm/services/traffic/internal/traffic"
)

// Name is the program name of the traffic controller service.
const Name = "traffic"

// Collections are the store collections the traffic controller service opens
// on its view of the store (Env.StoreFor(Name)): its database user's role
// needs these and no other. docs/store.md's roles and mongosh script are
// generated from them (make generate).
var Collections = slices.Concat(traffic.Collections, dns.Collections)

// Build is the traffic controller service's app.Build: the store (its
// copy of the logical clouds' facts, which core tells it, answers a group
// create's parent check: it holds no client of core); and the resource
// synchronizer, whose cluster connections and
// ServiceAccount tokens the external-dns runs read DNSEndpoints with. It
// serves the public API and the internal one core calls, and runs the
// external-dns loop (DCM_DNS_INTERVAL).
func Build(_ context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	st, err := env.StoreFor(Name)
	if err != nil {
		return nil, server.Options{}, err
	}
	conns, closeAll, err := env.DialPeers(env.Config.RsyncAddr)
	if err != nil {
		return nil, server.Options{}, err
	}
	svc := traffic.New(st)
	runs := dns.New(st, dns.RsyncConnector(rsyncv1.NewRsyncInternalServiceClient(conns[0])), env.Log.Named("dns"), env.Config.DNSInterval)
	return []server.Service{svc, svc.Internal(runs), facts.Serve(svc.Facts())}, server.Options{
		Background: []func(context.Context) error{func(ctx context.Context) error {
			runs.Run(ctx)
			return nil
		}},
		OnStop: []func(context.Context){closeAll},
	}, nil
}
