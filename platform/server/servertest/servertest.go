// Package servertest serves services for a test through the real server
// bootstrap (the whole interceptor chain) on a loopback port, on a real
// store, and returns a client connection to it.
package servertest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// Serve starts the services built on a fresh store and returns a
// connection, over mutual TLS with a local PKI made for the test.
func Serve(t testing.TB, build func(st *store.Store) []server.Service) *grpc.ClientConn {
	t.Helper()
	st := storetest.Open(t)
	tlsMat := TLS(t)
	cfg := server.Config{GRPCAddr: "127.0.0.1:0", ShutdownGrace: 5 * time.Second}
	srv, err := server.New(cfg, zaptest.NewLogger(t), server.Options{TLS: tlsMat}, build(st)...)
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	conn, err := client.Dial(srv.GRPCAddr(), tlsMat)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server stopped with %v", err)
		}
	})
	return conn
}

// TLS makes a local PKI in a temporary directory and loads the programs'
// certificate from it.
func TLS(t testing.TB) *pki.TLS {
	t.Helper()
	_, m := PKI(t)
	return m
}

// PKI makes a local PKI in a temporary directory and returns the directory
// (pki.LoadCA reads its CA to issue more) and the programs' certificate.
func PKI(t testing.TB) (string, *pki.TLS) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	if _, err := pki.Bootstrap(dir, pki.DefaultHosts()); err != nil {
		t.Fatalf("pki: %v", err)
	}
	m, err := pki.Load(pki.LocalFiles(dir))
	if err != nil {
		t.Fatalf("pki: %v", err)
	}
	return dir, m
}

// TwoCAs makes a local PKI in dir and another CA, and writes a CA bundle
// of both (as an installation whose operators' certificates come from a
// CA of their own): it returns the local CA, the other and the bundle.
func TwoCAs(t testing.TB, dir string) (local, other *pki.CA, bundle string) {
	t.Helper()
	if _, err := pki.Bootstrap(dir, pki.DefaultHosts()); err != nil {
		t.Fatalf("pki: %v", err)
	}
	local, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
	if err != nil {
		t.Fatalf("pki: %v", err)
	}
	if other, err = pki.NewCA("another CA of the bundle", time.Hour); err != nil {
		t.Fatalf("pki: %v", err)
	}
	bundle = filepath.Join(t.TempDir(), "bundle.crt")
	if err := os.WriteFile(bundle, append(pki.CertPEM(local.Cert.Raw), pki.CertPEM(other.Cert.Raw)...), 0o600); err != nil {
		t.Fatalf("bundle: %v", err)
	}
	return local, other, bundle
}
