package server_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
)

// probe is a hand-registered service whose handlers misbehave on purpose.
type probe struct{ handler func(context.Context) error }

func (p probe) Register(r grpc.ServiceRegistrar) {
	r.RegisterService(&grpc.ServiceDesc{
		ServiceName: "test.Probe",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Call",
			Handler: func(_ any, ctx context.Context, dec func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
				req := &structpb.Struct{}
				if err := dec(req); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, _ any) (any, error) { return &emptypb.Empty{}, p.handler(ctx) }
				return in(ctx, req, &grpc.UnaryServerInfo{FullMethod: "/test.Probe/Call"}, h)
			},
		}},
	}, p)
}

func TestChainMapsErrorsAndRecovers(t *testing.T) {
	t.Parallel()
	var handler func(context.Context) error
	conn := servertest.Serve(t, func(*store.Store) []server.Service {
		return []server.Service{probe{func(ctx context.Context) error { return handler(ctx) }}}
	})
	call := func() error {
		return conn.Invoke(context.Background(), "/test.Probe/Call", &structpb.Struct{}, &emptypb.Empty{})
	}
	cases := []struct {
		name    string
		handler func(context.Context) error
		code    codes.Code
		msg     string
	}{
		{"domain error keeps its code and message", func(context.Context) error { return errs.NotFound("thing %q not found", "x") }, codes.NotFound, `thing "x" not found`},
		{"invalid names the field", func(context.Context) error { return errs.Invalid("spec.x", "bad") }, codes.InvalidArgument, "spec.x: bad"},
		{"plain error hides its detail", func(context.Context) error { return context.DeadlineExceeded }, codes.DeadlineExceeded, "deadline exceeded"},
		{"unknown error is internal, detail hidden", func(context.Context) error { return errUnexpected }, codes.Internal, "internal error"},
		{"panic is recovered", func(context.Context) error { panic("boom") }, codes.Internal, "internal error"},
	}
	for _, c := range cases {
		handler = c.handler
		err := call()
		st, _ := status.FromError(err)
		require.Equal(t, c.code, st.Code(), c.name)
		require.Equal(t, c.msg, st.Message(), c.name)
	}
	handler = func(context.Context) error { return errs.Invalid("metadata.name", "too long") }
	st, _ := status.FromError(call())
	require.Equal(t, "metadata.name", errs.FieldOf(st), "the field travels in the status details")
}

var errUnexpected = &secretErr{}

type secretErr struct{}

func (*secretErr) Error() string { return "password=hunter2" }
