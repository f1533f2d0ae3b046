package server_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
)

// httpsClient trusts the test CA and presents cert, if any.
func httpsClient(m *pki.TLS, cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: m.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
}

// issue returns a files-backed TLS for a certificate the test CA (or
// another CA) signs with identity id.
func issue(t *testing.T, ca *pki.CA, caFile string, id pki.Identity, notAfter time.Time) (*pki.TLS, tls.Certificate) {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(pki.Request{Identity: id, Client: true, NotAfter: notAfter})
	require.NoError(t, err)
	dir := t.TempDir()
	files := pki.Files{CA: caFile, Cert: filepath.Join(dir, "c.crt"), Key: filepath.Join(dir, "c.key")}
	require.NoError(t, writeFile(files.Cert, certPEM))
	require.NoError(t, writeFile(files.Key, keyPEM))
	m, err := pki.Load(files)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return m, pair
}

// TestMutualTLS: gRPC takes DCM services and admins with a certificate of
// the CA and nobody else; HTTPS serves /healthz to anyone and /metrics to
// holders of a valid admin client certificate only.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	dir, tlsMat := servertest.PKI(t)
	ca, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
	require.NoError(t, err)
	caFile := filepath.Join(dir, pki.CACertFile)
	cfg := server.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", ShutdownGrace: time.Second}
	srv, err := server.New(cfg, zaptest.NewLogger(t), server.Options{TLS: tlsMat}, probe{func(context.Context) error { return nil }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	year := time.Now().Add(365 * 24 * time.Hour)
	admin, adminCert := issue(t, ca, caFile, pki.Identity{Subject: "root", Role: pki.RoleAdmin}, year)
	reader, readerCert := issue(t, ca, caFile, pki.Identity{Subject: "r", Role: pki.RoleReader}, year)
	_, expiredCert := issue(t, ca, caFile, pki.Identity{Subject: "old", Role: pki.RoleAdmin}, time.Now().Add(-time.Hour))
	other, err := pki.NewCA("other", time.Hour)
	require.NoError(t, err)
	_, strangerCert := issue(t, other, caFile, pki.Identity{Subject: "x", Role: pki.RoleAdmin}, year)

	check := func(m *pki.TLS) codes.Code {
		conn, err := client.Dial(srv.GRPCAddr(), m)
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		_, err = healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
		return status.Code(err)
	}
	require.Equal(t, codes.OK, check(tlsMat), "a DCM service")
	require.Equal(t, codes.OK, check(admin), "an admin (grpcurl)")
	require.Equal(t, codes.PermissionDenied, check(reader), "a tenant's certificate does not bypass the gateway")
	require.Equal(t, codes.Unavailable, check(nil), "plaintext is refused")

	get := func(path string, cert *tls.Certificate) int {
		resp, err := httpsClient(tlsMat, cert).Get("https://" + srv.HTTPAddr() + path)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get("/healthz", nil))
	require.Equal(t, http.StatusUnauthorized, get("/metrics", nil))
	require.Equal(t, http.StatusUnauthorized, get("/metrics", &expiredCert))
	require.Equal(t, http.StatusUnauthorized, get("/metrics", &strangerCert))
	require.Equal(t, http.StatusOK, get("/metrics", &adminCert))
	require.Equal(t, http.StatusForbidden, get("/metrics", &readerCert), "/metrics is for admins")
}

// TestPlaintextIsOptIn: no TLS means no server, unless configured; plain
// HTTP only on loopback.
func TestPlaintextIsOptIn(t *testing.T) {
	t.Parallel()
	log := zaptest.NewLogger(t)
	svc := probe{func(context.Context) error { return nil }}
	_, err := server.New(server.Config{GRPCAddr: "127.0.0.1:0"}, log, server.Options{}, svc)
	require.ErrorContains(t, err, "DCM_INSECURE_GRPC")
	_, err = server.New(server.Config{HTTPAddr: "127.0.0.1:0"}, log, server.Options{})
	require.ErrorContains(t, err, "DCM_INSECURE_HTTP")
	_, err = server.New(server.Config{HTTPAddr: "0.0.0.0:0", InsecureHTTP: true}, log, server.Options{})
	require.ErrorContains(t, err, "loopback")

	srv, err := server.New(server.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", InsecureGRPC: true, InsecureHTTP: true, ShutdownGrace: time.Second}, log, server.Options{}, svc)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	resp, err := http.Get("http://" + srv.HTTPAddr() + "/healthz")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	conn, err := client.Dial(srv.GRPCAddr(), nil)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
}

// TestInsecureGRPCOnlyOnLoopback: plaintext gRPC has no authorization, so
// New refuses it on any address but loopback, naming the setting, before it
// listens. The refused addresses are ones where a listen would fail with
// another error (192.0.2.1 is not this host's; the wildcard port is held on
// loopback), so an error naming the setting and not "listen" proves that
// nothing listened.
func TestInsecureGRPCOnlyOnLoopback(t *testing.T) {
	t.Parallel()
	log := zaptest.NewLogger(t)
	svc := probe{func(context.Context) error { return nil }}
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = held.Close() }()
	_, port, err := net.SplitHostPort(held.Addr().String())
	require.NoError(t, err)
	for _, addr := range []string{"0.0.0.0:0", "0.0.0.0:" + port, "192.0.2.1:0", "[::]:0", "example.com:9090"} {
		_, err := server.New(server.Config{GRPCAddr: addr, InsecureGRPC: true}, log, server.Options{}, svc)
		require.ErrorContains(t, err, "DCM_INSECURE_GRPC", addr)
		require.ErrorContains(t, err, "loopback", addr)
		require.NotContains(t, err.Error(), "listen ", addr)
		require.Error(t, server.CheckInsecure(server.Config{GRPCAddr: addr, InsecureGRPC: true}), addr)
	}
	// With TLS the same addresses are the operator's choice; the check is
	// only about the switch.
	require.NoError(t, server.CheckInsecure(server.Config{GRPCAddr: "0.0.0.0:0"}))

	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		srv, err := server.New(server.Config{GRPCAddr: addr, InsecureGRPC: true, ShutdownGrace: time.Second}, log, server.Options{}, svc)
		require.NoError(t, err, addr)
		require.True(t, server.IsLoopback(srv.GRPCAddr()), srv.GRPCAddr())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Run(ctx) }()
		cancel()
		require.NoError(t, <-done)
	}
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }
