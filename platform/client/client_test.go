package client

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// replica is a gRPC server on loopback that counts the calls it serves.
type replica struct {
	addr  string
	srv   *grpc.Server
	calls atomic.Int64
}

func startReplica(t *testing.T) *replica { return startReplicaOn(t, "127.0.0.1:0", nil) }

// startReplicaOn is a replica on addr whose every call is answered with
// answer (nil: the health service's own answer).
func startReplicaOn(t *testing.T, addr string, answer error) *replica {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	r := &replica{addr: ln.Addr().String()}
	r.srv = grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		r.calls.Add(1)
		if answer != nil {
			return nil, answer
		}
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(r.srv, health.NewServer())
	go func() { _ = r.srv.Serve(ln) }()
	t.Cleanup(r.srv.Stop)
	return r
}

// TestDialList: a list of addresses is one client spreading calls over
// every replica; with one stopped, calls go on succeeding on the others.
func TestDialList(t *testing.T) {
	t.Parallel()
	a, b := startReplica(t), startReplica(t)
	conn, err := Dial(a.addr+", "+b.addr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	hc := healthpb.NewHealthClient(conn)
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	// Both replicas serve: round robin reaches each once both are up.
	require.Eventually(t, func() bool {
		require.NoError(t, call())
		return a.calls.Load() > 0 && b.calls.Load() > 0
	}, 10*time.Second, 10*time.Millisecond, "calls reach both replicas")

	a.srv.Stop()
	// The client notices the stopped replica on its first failed call at
	// the latest; from then on every call goes to the other.
	require.Eventually(t, func() bool { return call() == nil }, 10*time.Second, 10*time.Millisecond)
	before, served := a.calls.Load(), b.calls.Load()
	for range 20 {
		require.NoError(t, call())
	}
	require.Equal(t, before, a.calls.Load())
	require.Equal(t, served+20, b.calls.Load())
}

// TestDialListRefusesBadAddresses: an address of a list that is not
// host:port is named in the error.
func TestDialListRefusesBadAddresses(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:1,core-1", "127.0.0.1:1,,127.0.0.1:2", "127.0.0.1:1,"} {
		_, err := Dial(addr, nil)
		require.Error(t, err, addr)
		require.True(t, strings.Contains(err.Error(), "of the list"), "%s: %v", addr, err)
	}
}
