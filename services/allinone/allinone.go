// Package allinone composes every DCM service and the REST gateway into one
// program (the embedded default): one store, one gRPC endpoint serving every
// service, one HTTP endpoint for REST, /metrics and /healthz. Services still
// reach each other only through their gRPC clients and that server's
// interceptors, over in-process connections (platform/server.InProcess:
// no socket, no TLS, the program's own certificate identity); other
// programs reach it over mutual TLS.
package allinone

import (
	"context"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/cadist"
	"github.com/dcm-project/dcm/services/core"
	"github.com/dcm-project/dcm/services/gateway"
	"github.com/dcm-project/dcm/services/namespace"
	"github.com/dcm-project/dcm/services/quota"
	"github.com/dcm-project/dcm/services/rsync"
	"github.com/dcm-project/dcm/services/servicemesh"
	"github.com/dcm-project/dcm/services/traffic"
	"github.com/dcm-project/dcm/services/user"
)

// Name is the all-in-one program's name.
const Name = "dcm"

// Builds are the parts of the program, in start order.
var Builds = []app.Build{
	core.Build, namespace.Build, user.Build, quota.Build,
	servicemesh.Build, cadist.Build, traffic.Build, rsync.Build,
	gateway.Build,
}

// StoreUser is a service that opens the store: its program name, the name
// of its view of the store (Env.StoreFor), and the collections it opens.
type StoreUser struct {
	Name        string
	Collections []string
}

// StoreUsers are the services of Builds that open the store, in start
// order, with the collections each declares (the gateway opens none).
// docs/store.md's database roles are generated from this list
// (cmd/storedoc, make generate); its test builds every service on a store
// and fails when one opens a collection its list leaves out.
var StoreUsers = []StoreUser{
	{core.Name, core.Collections}, {namespace.Name, namespace.Collections},
	{user.Name, user.Collections}, {quota.Name, quota.Collections},
	{servicemesh.Name, servicemesh.Collections}, {cadist.Name, cadist.Collections},
	{traffic.Name, traffic.Collections}, {rsync.Name, rsync.Collections},
}

// Build is the all-in-one program's app.Build.
func Build(ctx context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	var all []server.Service
	var opts server.Options
	for _, b := range Builds {
		svcs, o, err := b(ctx, env)
		if err != nil {
			for _, stop := range opts.OnStop {
				stop(ctx)
			}
			return nil, server.Options{}, err
		}
		all = append(all, svcs...)
		if o.HTTPHandler != nil {
			opts.HTTPHandler, opts.HTTPAuth = o.HTTPHandler, o.HTTPAuth
		}
		opts.Background = append(opts.Background, o.Background...)
		opts.OnStop = append(opts.OnStop, o.OnStop...)
		opts.MaxRecvMsgSize = max(opts.MaxRecvMsgSize, o.MaxRecvMsgSize)
	}
	// The namespace, user, quota and traffic services each serve the facts
	// contract over their own copy: on this one server, one registration
	// tells them all.
	return facts.Merge(all), opts, nil
}
