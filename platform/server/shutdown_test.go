package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
)

// TestShutdownReportsNotServingFirst: a health watcher sees NOT_SERVING
// before the server stops, and Run returns cleanly.
func TestShutdownReportsNotServingFirst(t *testing.T) {
	t.Parallel()
	cfg := server.Config{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", ShutdownGrace: time.Second}
	tlsMat := servertest.TLS(t)
	srv, err := server.New(cfg, zaptest.NewLogger(t), server.Options{TLS: tlsMat}, probe{func(context.Context) error { return nil }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	resp, err := httpsClient(tlsMat, nil).Get("https://" + srv.HTTPAddr() + "/healthz")
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	_ = resp.Body.Close()

	conn, err := client.Dial(srv.GRPCAddr(), tlsMat)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	watch, err := healthpb.NewHealthClient(conn).Watch(watchCtx, &healthpb.HealthCheckRequest{Service: "test.Probe"})
	require.NoError(t, err)
	first, err := watch.Recv()
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, first.GetStatus())

	cancel()
	next, err := watch.Recv()
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, next.GetStatus())
	stopWatch() // the graceful stop waits for open streams to end
	require.NoError(t, <-done)
}
