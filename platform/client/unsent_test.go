package client

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// freeAddr is a loopback address where nothing listens (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// serveOn serves health on addr, counting the calls that reach it; answer
// is what each call gets (nil: health's own answer).
func serveOn(t *testing.T, addr string, answer error) *atomic.Int64 {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	var calls atomic.Int64
	srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		calls.Add(1)
		if answer != nil {
			return nil, answer
		}
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return &calls
}

func check(t *testing.T, addr string) (time.Duration, error) {
	t.Helper()
	conn, err := Dial(addr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return time.Since(start), err
}

// TestUnsentCallWaitsForAPeer: a call made while no address of its peer
// listens (a rolling restart's moment) is sent once one does, within
// UnsentWait; a peer that stays down answers Unavailable after it; a call
// a peer answered Unavailable is not sent again.
func TestUnsentCallWaitsForAPeer(t *testing.T) {
	t.Parallel()
	t.Run("a peer comes up", func(t *testing.T) {
		t.Parallel()
		addr := freeAddr(t)
		calls := make(chan *atomic.Int64, 1)
		time.AfterFunc(500*time.Millisecond, func() { calls <- serveOn(t, addr, nil) })
		took, err := check(t, addr)
		require.NoError(t, err, "sent once the peer listens")
		require.Less(t, took, UnsentWait)
		require.Equal(t, int64(1), (<-calls).Load(), "the peer served it once")
	})
	t.Run("the peer stays down", func(t *testing.T) {
		t.Parallel()
		took, err := check(t, freeAddr(t))
		require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		require.Contains(t, err.Error(), "connection refused", "the first answer says why")
		require.GreaterOrEqual(t, took, UnsentWait)
	})
	t.Run("the peer answers Unavailable", func(t *testing.T) {
		t.Parallel()
		addr := freeAddr(t)
		calls := serveOn(t, addr, status.Error(codes.Unavailable, "the store is down"))
		_, err := check(t, addr)
		require.Equal(t, codes.Unavailable, status.Code(err))
		require.Contains(t, err.Error(), "the store is down")
		require.Equal(t, int64(1), calls.Load(), "a call that reached its peer is never sent again")
	})
}
