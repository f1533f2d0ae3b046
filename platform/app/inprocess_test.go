package app_test

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	authv1 "github.com/dcm-project/dcm/gen/dcm/auth/v1"
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/server"
)

// whoAuth answers Authenticate with who called it: the caller's
// certificate identity as the interceptors saw it, and the connection's
// address.
type whoAuth struct {
	authv1.UnimplementedAuthServiceServer
}

func (whoAuth) Register(r grpc.ServiceRegistrar) { authv1.RegisterAuthServiceServer(r, whoAuth{}) }

func (whoAuth) Authenticate(ctx context.Context, _ *authv1.AuthenticateRequest) (*authv1.AuthenticateResponse, error) {
	p, _ := peer.FromContext(ctx)
	return &authv1.AuthenticateResponse{Token: &authv1.Token{Subject: server.Peer(ctx).Subject, Role: server.Peer(ctx).Role,
		Project: p.Addr.String()}}, nil
}

func whoBuild(context.Context, *app.Env) ([]server.Service, server.Options, error) {
	return []server.Service{whoAuth{}}, server.Options{}, nil
}

// TestInProcessCalls: a program's calls to the services it serves itself
// stay in the process, and the server still sees the program's own
// certificate identity and applies its allow-lists to it; the network
// listener still takes mutual TLS only.
func TestInProcessCalls(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(name string) *app.Program {
		p, err := app.Start(ctx, name, []string{"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-data-dir", t.TempDir()}, false, whoBuild, app.LogTo(io.Discard))
		require.NoError(t, err)
		return p
	}

	gw := start("gateway") // AuthService declares the gateway its caller
	conn, err := gw.Env.Dial("")
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	resp, err := authv1.NewAuthServiceClient(conn).Authenticate(ctx, &authv1.AuthenticateRequest{Token: "x"})
	require.NoError(t, err)
	require.Equal(t, "gateway", resp.GetToken().GetSubject(), "the caller is the program's own certificate")
	require.Equal(t, "service", resp.GetToken().GetRole())
	require.Equal(t, "bufconn", resp.GetToken().GetProject(), "the call did not leave the process")

	plain, err := client.Dial(gw.Server.GRPCAddr(), nil)
	require.NoError(t, err)
	defer func() { _ = plain.Close() }()
	_, err = authv1.NewAuthServiceClient(plain).Authenticate(ctx, &authv1.AuthenticateRequest{Token: "x"})
	require.Equal(t, codes.Unavailable, status.Code(err), "the network listener takes mutual TLS only: %v", err)

	ns := start("namespace") // not a caller AuthService declares
	conn, err = ns.Env.Dial("")
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = authv1.NewAuthServiceClient(conn).Authenticate(ctx, &authv1.AuthenticateRequest{Token: "x"})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "allow-lists apply to in-process callers: %v", err)
}
