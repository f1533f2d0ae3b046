// Package servertest serves services for a test through the real server
// bootstrap (the whole interceptor chain) on a loopback port, on a real
// store, and returns a client connection to it.
package servertest

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"

	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// Serve starts the services built on a fresh store and returns a connection.
func Serve(t testing.TB, build func(st *store.Store) []server.Service) *grpc.ClientConn {
	t.Helper()
	st := storetest.Open(t)
	cfg := server.Config{GRPCAddr: "127.0.0.1:0", ShutdownGrace: 5 * time.Second}
	srv, err := server.New(cfg, zaptest.NewLogger(t), server.Options{}, build(st)...)
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	conn, err := client.Dial(srv.GRPCAddr())
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
