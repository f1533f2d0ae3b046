package main

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestEchoRunsTheServersInterceptors: the xds server enforces istiod's
// AuthorizationPolicies (RBAC) as a unary interceptor, so the echo
// handler must run the one it is given. A handler that skipped it
// answered every caller, and a DCM policy seemed not to refuse anyone.
func TestEchoRunsTheServersInterceptors(t *testing.T) {
	for _, tc := range []struct {
		name string
		deny bool
		want codes.Code
	}{{"allowed", false, codes.OK}, {"refused", true, codes.PermissionDenied}} {
		t.Run(tc.name, func(t *testing.T) {
			var seen atomic.Value
			srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				seen.Store(info.FullMethod)
				if tc.deny {
					return nil, status.Error(codes.PermissionDenied, "RBAC: denied")
				}
				return h(ctx, req)
			}))
			register(srv)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go func() { _ = srv.Serve(lis) }()
			t.Cleanup(srv.Stop)
			conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			out := new(wrapperspb.StringValue)
			err = conn.Invoke(ctx, method, wrapperspb.String("hello"), out)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code %s (%v), want %s", got, err, tc.want)
			}
			if got, _ := seen.Load().(string); got != method {
				t.Fatalf("interceptor saw method %q, want %q", got, method)
			}
			if tc.want == codes.OK && out.GetValue() != "client=plaintext echo=hello" {
				t.Fatalf("answer %q", out.GetValue())
			}
		})
	}
}
