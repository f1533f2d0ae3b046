package server_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
)

// echoService answers the request's string.
type echoService struct{}

func (echoService) Register(r grpc.ServiceRegistrar) {
	r.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Call",
			Handler: func(_ any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
				req := &wrapperspb.StringValue{}
				if err := dec(req); err != nil {
					return nil, err
				}
				if in == nil {
					return req, nil
				}
				h := func(_ context.Context, req any) (any, error) { return req, nil }
				return in(ctx, req, &grpc.UnaryServerInfo{FullMethod: "/test.Echo/Call"}, h)
			},
		}},
	}, echoService{})
}

// TestMaxRecvMsgSize: a request above gRPC's default 4 MiB is refused
// (ResourceExhausted) unless the server's options raise the limit.
func TestMaxRecvMsgSize(t *testing.T) {
	t.Parallel()
	big := &healthpb.HealthCheckRequest{Service: strings.Repeat("m", 5<<20)}
	for _, c := range []struct {
		name  string
		limit int
		code  codes.Code
	}{
		{"default", 0, codes.ResourceExhausted},
		{"raised", client.MaxRecvMsgSize, codes.NotFound}, // taken, and no such service
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tlsMat := servertest.TLS(t)
			cfg := server.Config{GRPCAddr: "127.0.0.1:0", ShutdownGrace: time.Second}
			srv, err := server.New(cfg, zaptest.NewLogger(t), server.Options{TLS: tlsMat, MaxRecvMsgSize: c.limit}, echoService{})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				require.NoError(t, <-done)
			})
			conn, err := client.Dial(srv.GRPCAddr(), tlsMat)
			require.NoError(t, err)
			defer func() { _ = conn.Close() }()
			_, err = healthpb.NewHealthClient(conn).Check(context.Background(), big)
			require.Equal(t, c.code, status.Code(err), "%v", err)
		})
	}
}

// TestClientTakesLargeAnswers: DCM's client takes an answer above gRPC's
// default 4 MiB (client.MaxRecvMsgSize) from a peer.
func TestClientTakesLargeAnswers(t *testing.T) {
	t.Parallel()
	tlsMat := servertest.TLS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tlsMat.GRPCServer())), grpc.MaxRecvMsgSize(client.MaxRecvMsgSize))
	echoService{}.Register(srv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := client.Dial(ln.Addr().String(), tlsMat)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	big := &wrapperspb.StringValue{Value: strings.Repeat("m", 5<<20)}
	got := &wrapperspb.StringValue{}
	require.NoError(t, conn.Invoke(context.Background(), "/test.Echo/Call", big, got))
	require.Len(t, got.GetValue(), len(big.GetValue()))
	err = conn.Invoke(context.Background(), "/test.Echo/Call", big, got, grpc.MaxCallRecvMsgSize(4<<20))
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "gRPC's default would refuse it: %v", err)
}
