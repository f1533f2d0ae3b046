// Package gateway is the REST gateway's entry point for the programs that
// serve it (its own command and the all-in-one program).
package gateway

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc"

	authv1 "github.com/dcm-project/dcm/gen/dcm/auth/v1"
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/logging"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/gateway/internal/gateway"
)

// Name is the program name of the gateway.
const Name = "gateway"

// Build is the gateway's app.Build: REST on DCM_HTTP_ADDR (HTTPS unless
// DCM_INSECURE_HTTP), authenticated and authorized, routed to each
// service's configured gRPC address over mutual TLS. It serves no gRPC API
// of its own.
func Build(ctx context.Context, env *app.Env) (_ []server.Service, _ server.Options, err error) {
	cfg := env.Config
	conns := map[string]*grpc.ClientConn{}
	closeAll := func(context.Context) {
		for _, c := range conns {
			_ = c.Close()
		}
	}
	defer func() {
		if err != nil {
			closeAll(ctx)
		}
	}()
	// One connection per distinct address: the all-in-one program serves
	// every service on one.
	dial := func(addr string) (*grpc.ClientConn, error) {
		addr = cfg.Peer(addr)
		if c, ok := conns[addr]; ok {
			return c, nil
		}
		c, err := env.Dial(addr)
		if err != nil {
			return nil, err
		}
		conns[addr] = c
		return c, nil
	}
	var gc gateway.Conns
	for _, d := range []struct {
		addr string
		conn **grpc.ClientConn
	}{{cfg.CoreAddr, &gc.Core}, {cfg.NamespaceAddr, &gc.Namespace}, {cfg.UserAddr, &gc.User}, {cfg.QuotaAddr, &gc.Quota},
		{cfg.RsyncAddr, &gc.Rsync}, {cfg.CADistAddr, &gc.CADist}, {cfg.ServiceMeshAddr, &gc.ServiceMesh},
		{cfg.TrafficAddr, &gc.Traffic}} {
		if *d.conn, err = dial(d.addr); err != nil {
			return nil, server.Options{}, err
		}
	}
	// Every service keeps its own records, so key rotation goes to each.
	for _, addr := range []string{cfg.CoreAddr, cfg.NamespaceAddr, cfg.UserAddr, cfg.QuotaAddr,
		cfg.ServiceMeshAddr, cfg.CADistAddr, cfg.TrafficAddr, cfg.RsyncAddr} {
		c, err := dial(addr)
		if err != nil {
			return nil, server.Options{}, err
		}
		if !slices.Contains(gc.Stores, c) {
			gc.Stores = append(gc.Stores, c)
		}
	}
	auth := &gateway.Authenticator{AdminToken: env.AdminToken, Tokens: authv1.NewAuthServiceClient(gc.Core),
		Failures: gateway.NewFailureLimiter(cfg.AuthFailureBurst, cfg.AuthFailureRefill), CacheTTL: gateway.TokenCacheTTL}
	if !cfg.InsecureHTTP {
		auth.TLS = env.TLS
	}
	h, err := gateway.New(ctx, gc, auth, env.Log.Named(logging.AuditName),
		gateway.Limits{WatchMax: cfg.WatchMax, WriteTimeout: cfg.HTTPWriteTimeout, MaxWatches: cfg.MaxWatches,
			Dialect: cfg.GatewayDialect})
	if err != nil {
		return nil, server.Options{}, fmt.Errorf("gateway: %w", err)
	}
	return nil, server.Options{HTTPHandler: h, HTTPAuth: auth.Authenticate, OnStop: []func(context.Context){closeAll}}, nil
}
