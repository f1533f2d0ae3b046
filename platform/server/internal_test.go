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
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
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

// echoes is a server with the echo services (access_test.go declares
// their callers) and the CAs to issue callers from.
type echoes struct {
	srv *server.Server
	// own is the server's own TLS material (the all-in-one program's, CN dcm).
	own *pki.TLS
	// ca is the installation's CA (the service CA); foreign is another CA
	// of the same bundle, e.g. one that issues admins' certificates.
	ca, foreign *pki.CA
	// bundle holds both.
	bundle string
}

// serveEchoes runs a server with the echo services, logging to log, whose
// CA bundle holds the local CA and a foreign one.
func serveEchoes(t *testing.T, log *zap.Logger) echoes {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	ca, foreign, bundle := servertest.TwoCAs(t, dir)
	files := pki.LocalFiles(dir)
	files.CA = bundle
	own, err := pki.Load(files)
	require.NoError(t, err)
	cfg := server.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", ShutdownGrace: time.Second}
	srv, err := server.New(cfg, log, server.Options{TLS: own},
		echo{"dcm.test.v1.EchoService"}, echo{"dcm.test.v1.EchoInternalService"}, echo{"dcm.test.v1.EchoUndeclaredService"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return echoes{srv: srv, own: own, ca: ca, foreign: foreign, bundle: bundle}
}

// call calls service's Call as m and returns the code.
func (e echoes) call(t *testing.T, m *pki.TLS, service string) codes.Code {
	t.Helper()
	conn, err := client.Dial(e.srv.GRPCAddr(), m)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return status.Code(conn.Invoke(ctx, "/dcm.test.v1."+service+"/Call", &structpb.Struct{}, &emptypb.Empty{}))
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

// trusting is a client certificate for id from ca that trusts every
// server of the bundle.
func trusting(t *testing.T, ca *pki.CA, bundle string, id pki.Identity, notAfter time.Time) *pki.TLS {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(pki.Request{Identity: id, Client: true, NotAfter: notAfter})
	require.NoError(t, err)
	dir := t.TempDir()
	files := pki.Files{CA: bundle, ServiceCA: bundle, Cert: filepath.Join(dir, "c.crt"), Key: filepath.Join(dir, "c.key")}
	require.NoError(t, writeFile(files.Cert, certPEM))
	require.NoError(t, writeFile(files.Key, keyPEM))
	m, err := pki.Load(files)
	require.NoError(t, err)
	return m
}

// TestAllowLists: over gRPC each method is served to the callers its
// contract names (access_test.go): a program by its certificate's common
// name, the all-in-one program everywhere a program is named, admins where
// admitted; a service declaring no callers to nobody; tenants to nobody.
// The role service is believed only from the service CA: a certificate of
// another CA of the bundle claiming it is refused.
func TestAllowLists(t *testing.T) {
	t.Parallel()
	e := serveEchoes(t, zaptest.NewLogger(t))
	year := time.Now().Add(365 * 24 * time.Hour)
	svc := func(name string) pki.Identity { return pki.Identity{Subject: name, Role: pki.RoleService} }
	core, _ := issue(t, e.ca, e.bundle, svc("core"), year)
	gateway, _ := issue(t, e.ca, e.bundle, svc("gateway"), year)
	admin, _ := issue(t, e.ca, e.bundle, pki.Identity{Subject: "root", Role: pki.RoleAdmin}, year)
	tenant, _ := issue(t, e.ca, e.bundle, pki.Identity{Subject: "t", Role: pki.RoleProjectAdmin, Project: "p"}, year)
	// A program of the foreign CA would trust servers of its own CA only:
	// this one trusts the bundle, to reach the server and be refused there.
	foreignCore := trusting(t, e.foreign, e.bundle, svc("core"), year)
	foreignAdmin, _ := issue(t, e.foreign, e.bundle, pki.Identity{Subject: "ops", Role: pki.RoleAdmin}, year)
	cases := []struct {
		who     string
		m       *pki.TLS
		service string
		want    codes.Code
	}{
		{"all-in-one on public", e.own, "EchoService", codes.OK},
		{"all-in-one on internal", e.own, "EchoInternalService", codes.OK},
		{"all-in-one on undeclared", e.own, "EchoUndeclaredService", codes.PermissionDenied},
		{"gateway on public", gateway, "EchoService", codes.OK},
		{"gateway on internal", gateway, "EchoInternalService", codes.PermissionDenied},
		{"core on internal", core, "EchoInternalService", codes.OK},
		{"core on public", core, "EchoService", codes.PermissionDenied},
		{"admin on public", admin, "EchoService", codes.OK},
		{"admin on internal", admin, "EchoInternalService", codes.PermissionDenied},
		{"admin on undeclared", admin, "EchoUndeclaredService", codes.PermissionDenied},
		{"tenant on public", tenant, "EchoService", codes.PermissionDenied},
		{"tenant on internal", tenant, "EchoInternalService", codes.PermissionDenied},
		{"core of a foreign CA on internal", foreignCore, "EchoInternalService", codes.PermissionDenied},
		{"admin of a foreign CA of the bundle on public", foreignAdmin, "EchoService", codes.OK},
	}
	for _, c := range cases {
		require.Equal(t, c.want, e.call(t, c.m, c.service), c.who)
	}
}

// TestDirectCallsAudited: a call made directly over gRPC with an operator's
// certificate leaves an audit line with the certificate's identity and the
// outcome, refused ones too; the programs' own calls (which act for a REST
// caller the gateway audited) do not.
func TestDirectCallsAudited(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.DebugLevel)
	e := serveEchoes(t, zap.New(core).Named("dcm"))
	admin, _ := issue(t, e.ca, e.bundle, pki.Identity{Subject: "root", Role: pki.RoleAdmin}, time.Now().Add(time.Hour))
	e.call(t, admin, "EchoService")
	e.call(t, admin, "EchoInternalService")
	e.call(t, e.own, "EchoService")
	audit := logs.FilterLoggerName("dcm.audit")
	ok := audit.FilterMessage("grpc call").FilterField(zap.String("subject", "root")).FilterField(zap.String("role", pki.RoleAdmin)).
		FilterField(zap.String("grpc.method", "/dcm.test.v1.EchoService/Call")).FilterField(zap.Bool("ok", true))
	require.Equal(t, 1, ok.Len(), "%v", audit.All())
	refused := audit.FilterMessage("grpc call refused").FilterField(zap.String("subject", "root")).
		FilterField(zap.String("grpc.method", "/dcm.test.v1.EchoInternalService/Call"))
	require.Equal(t, 1, refused.Len(), "%v", audit.All())
	require.Equal(t, 2, audit.Len(), "the program's own call is not audited here: %v", audit.All())
}

// TestInsecureGRPCKeepsAllowLists: with DCM_INSECURE_GRPC (plaintext, no
// certificate) every call is still checked against the method's
// allow-list, for the program the call names (pki.InsecureProgramKey,
// set by client.DialInsecure): a call that names none is served health
// and reflection only; a named program reaches what its name may call and
// nothing else; no name reaches a method that declares no callers.
// (Before, plaintext gRPC served every method to every local process.)
func TestInsecureGRPCKeepsAllowLists(t *testing.T) {
	t.Parallel()
	cfg := server.Config{GRPCAddr: "127.0.0.1:0", InsecureGRPC: true, ShutdownGrace: time.Second}
	srv, err := server.New(cfg, zaptest.NewLogger(t), server.Options{},
		echo{"dcm.test.v1.EchoService"}, echo{"dcm.test.v1.EchoInternalService"}, echo{"dcm.test.v1.EchoUndeclaredService"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	call := func(program, method string) codes.Code {
		conn, err := client.DialInsecure(srv.GRPCAddr(), program)
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return status.Code(conn.Invoke(ctx, method, &structpb.Struct{}, &emptypb.Empty{}))
	}
	const public, internal, undeclared = "/dcm.test.v1.EchoService/Call", "/dcm.test.v1.EchoInternalService/Call", "/dcm.test.v1.EchoUndeclaredService/Call"
	for _, c := range []struct {
		program, method string
		want            codes.Code
	}{
		{"", "/grpc.health.v1.Health/Check", codes.OK},
		{"", public, codes.PermissionDenied},
		{"", internal, codes.PermissionDenied},
		{"gateway", public, codes.OK},
		{"gateway", internal, codes.PermissionDenied},
		{"core", internal, codes.OK},
		{"core", public, codes.PermissionDenied},
		{"admin", public, codes.PermissionDenied}, // an admin is never claimed
		{pki.AllInOne, public, codes.OK},
		{pki.AllInOne, internal, codes.OK},
		{pki.AllInOne, undeclared, codes.PermissionDenied},
		{"core", undeclared, codes.PermissionDenied},
	} {
		method := c.method
		var got codes.Code
		if method == "/grpc.health.v1.Health/Check" {
			conn, err := client.DialInsecure(srv.GRPCAddr(), c.program)
			require.NoError(t, err)
			_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			_ = conn.Close()
			got = status.Code(err)
		} else {
			got = call(c.program, method)
		}
		require.Equal(t, c.want, got, "%q calling %s", c.program, method)
	}
}
