package client

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
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

// healthOf is a client of addr's health service.
func healthOf(t *testing.T, addr string) healthpb.HealthClient {
	t.Helper()
	conn, err := Dial(addr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

// check is one call of hc, and how long it took.
func check(hc healthpb.HealthClient) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
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
		type result struct {
			took time.Duration
			err  error
		}
		hc := healthOf(t, addr)
		done := make(chan result, 1)
		go func() {
			took, err := check(hc)
			done <- result{took, err}
		}()
		time.Sleep(500 * time.Millisecond)
		r := startReplicaOn(t, addr, nil)
		got := <-done
		require.NoError(t, got.err, "sent once the peer listens")
		require.Less(t, got.took, UnsentWait)
		require.Equal(t, int64(1), r.calls.Load(), "the peer served it once")
	})
	t.Run("the peer stays down", func(t *testing.T) {
		t.Parallel()
		took, err := check(healthOf(t, freeAddr(t)))
		require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		require.Contains(t, err.Error(), "connection refused", "the first answer says why")
		require.GreaterOrEqual(t, took, UnsentWait)
	})
	t.Run("the peer answers Unavailable", func(t *testing.T) {
		t.Parallel()
		addr := freeAddr(t)
		r := startReplicaOn(t, addr, status.Error(codes.Unavailable, "the store is down"))
		_, err := check(healthOf(t, addr))
		require.Equal(t, codes.Unavailable, status.Code(err))
		require.Contains(t, err.Error(), "the store is down")
		require.Equal(t, int64(1), r.calls.Load(), "a call that reached its peer is never sent again")
	})
}
