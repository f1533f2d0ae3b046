// Package gateway is the REST gateway's entry point for the programs that
// serve it (its own command and the all-in-one program).
package gateway

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/gateway/internal/gateway"
)

// Name is the program name of the gateway.
const Name = "gateway"

// Build is the gateway's app.Build: REST on DCM_HTTP_ADDR, routed to each
// service's configured gRPC address. It serves no gRPC API of its own.
func Build(ctx context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	cfg := env.Config
	var conns []*grpc.ClientConn
	dial := func(addr string) (*grpc.ClientConn, error) {
		c, err := client.Dial(cfg.Peer(addr))
		if err == nil {
			conns = append(conns, c)
		}
		return c, err
	}
	closeAll := func(context.Context) {
		for _, c := range conns {
			_ = c.Close()
		}
	}
	core, err := dial(cfg.CoreAddr)
	if err != nil {
		closeAll(ctx)
		return nil, server.Options{}, err
	}
	h, err := gateway.New(ctx, gateway.Conns{Core: core})
	if err != nil {
		closeAll(ctx)
		return nil, server.Options{}, fmt.Errorf("gateway: %w", err)
	}
	return nil, server.Options{HTTPHandler: h, OnStop: []func(context.Context){closeAll}}, nil
}
