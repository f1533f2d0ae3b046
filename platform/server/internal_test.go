package server_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
)

// echo is a hand-registered service named name, with one method Call that
// answers OK.
type echo struct{ name string }

func (e echo) Register(r grpc.ServiceRegistrar) {
	method := "/" + e.name + "/Call"
	r.RegisterService(&grpc.ServiceDesc{
		ServiceName: e.name,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Call",
			Handler: func(_ any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
				req := &structpb.Struct{}
				if err := dec(req); err != nil {
					return nil, err
				}
				h := func(context.Context, any) (any, error) { return &emptypb.Empty{}, nil }
				return in(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, h)
			},
		}},
	}, e)
}

// serveEchoes runs a server with a public and an internal echo service,
// logging to log, and returns it, its own TLS material (role service),
// the CA and the CA file.
func serveEchoes(t *testing.T, log *zap.Logger) (*server.Server, *pki.TLS, *pki.CA, string) {
	t.Helper()
	dir, tlsMat := servertest.PKI(t)
	ca, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
	require.NoError(t, err)
	cfg := server.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", ShutdownGrace: time.Second}
	srv, err := server.New(cfg, log, server.Options{TLS: tlsMat},
		echo{"dcm.test.v1.EchoService"}, echo{"dcm.test.v1.EchoInternalService"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return srv, tlsMat, ca, filepath.Join(dir, pki.CACertFile)
}

func TestIsInternal(t *testing.T) {
	t.Parallel()
	for method, want := range map[string]bool{
		"/dcm.user.v1.UserInternalService/RenderUsers":              true,
		"/dcm.rsync.v1.RsyncInternalService/SubmitRollout":          true,
		"/dcm.user.v1.UserService/GetUser":                          false,
		"/dcm.core.v1.LogicalCloudService/GetLogicalCloud":          false,
		"/grpc.health.v1.Health/Check":                              false,
		"/dcm.x.v1.InternalServiceLookalike/Call":                   false,
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": false,
	} {
		require.Equal(t, want, server.IsInternal(method), method)
	}
}

// TestInternalServicesAreForServicesOnly: an internal service (its name
// ends with "InternalService") is served to the DCM service role alone; an
// admin certificate (an operator with grpcurl) is refused it, and still
// admitted on a public service. A tenant's certificate gets neither.
func TestInternalServicesAreForServicesOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, tlsMat, ca, caFile := serveEchoes(t, zaptest.NewLogger(t))

	year := time.Now().Add(365 * 24 * time.Hour)
	admin, _ := issue(t, ca, caFile, pki.Identity{Subject: "root", Role: pki.RoleAdmin}, year)
	tenant, _ := issue(t, ca, caFile, pki.Identity{Subject: "t", Role: pki.RoleProjectAdmin, Project: "p"}, year)
	call := func(m *pki.TLS, service string) codes.Code {
		conn, err := client.Dial(srv.GRPCAddr(), m)
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		return status.Code(conn.Invoke(cctx, "/dcm.test.v1."+service+"/Call", &structpb.Struct{}, &emptypb.Empty{}))
	}
	cases := []struct {
		who     string
		m       *pki.TLS
		service string
		want    codes.Code
	}{
		{"service on public", tlsMat, "EchoService", codes.OK},
		{"service on internal", tlsMat, "EchoInternalService", codes.OK},
		{"admin on public", admin, "EchoService", codes.OK},
		{"admin on internal", admin, "EchoInternalService", codes.PermissionDenied},
		{"tenant on public", tenant, "EchoService", codes.PermissionDenied},
		{"tenant on internal", tenant, "EchoInternalService", codes.PermissionDenied},
	}
	for _, c := range cases {
		require.Equal(t, c.want, call(c.m, c.service), c.who)
	}
}

// TestDirectCallsAudited: a call made directly over gRPC with an operator's
// certificate leaves an audit line with the certificate's identity and the
// outcome, refused ones too; the programs' own calls (which act for a REST
// caller the gateway audited) do not.
func TestDirectCallsAudited(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	core, logs := observer.New(zap.DebugLevel)
	srv, tlsMat, ca, caFile := serveEchoes(t, zap.New(core).Named("dcm"))
	admin, _ := issue(t, ca, caFile, pki.Identity{Subject: "root", Role: pki.RoleAdmin}, time.Now().Add(time.Hour))
	call := func(m *pki.TLS, service string) {
		conn, err := client.Dial(srv.GRPCAddr(), m)
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		_ = conn.Invoke(ctx, "/dcm.test.v1."+service+"/Call", &structpb.Struct{}, &emptypb.Empty{})
	}
	call(admin, "EchoService")
	call(admin, "EchoInternalService")
	call(tlsMat, "EchoService")
	audit := logs.FilterLoggerName("dcm.audit")
	ok := audit.FilterMessage("grpc call").FilterField(zap.String("subject", "root")).FilterField(zap.String("role", pki.RoleAdmin)).
		FilterField(zap.String("grpc.method", "/dcm.test.v1.EchoService/Call")).FilterField(zap.Bool("ok", true))
	require.Equal(t, 1, ok.Len(), "%v", audit.All())
	refused := audit.FilterMessage("grpc call refused").FilterField(zap.String("subject", "root")).
		FilterField(zap.String("grpc.method", "/dcm.test.v1.EchoInternalService/Call"))
	require.Equal(t, 1, refused.Len(), "%v", audit.All())
	require.Equal(t, 2, audit.Len(), "the program's own call is not audited here: %v", audit.All())
}
