package main

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/allinone"
)

// ceilingName is the logical cloud whose GET the ceiling handler answers.
// The REST route, the gateway, its authentication and authorization, the
// gRPC hop and core's interceptor chain are those of every other GET of a
// logical cloud; only the handler differs: it answers a fixed logical
// cloud and touches no store. No proto changes: the handler replaces core's
// GetLogicalCloud method in this benchmark program only, for this one name.
const ceilingName = "ceiling"

// build is the all-in-one program with the ceiling handler.
func build(ctx context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	svcs, opts, err := allinone.Build(ctx, env)
	for i, s := range svcs {
		svcs[i] = ceilingService{s}
	}
	return svcs, opts, err
}

type ceilingService struct{ server.Service }

func (c ceilingService) Register(r grpc.ServiceRegistrar) { c.Service.Register(ceilingRegistrar{r}) }

type ceilingRegistrar struct{ grpc.ServiceRegistrar }

// RegisterService registers every service as it is, but core's
// LogicalCloudService, whose GetLogicalCloud goes through ceiling.
func (r ceilingRegistrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	if desc.ServiceName != corev1.LogicalCloudService_ServiceDesc.ServiceName {
		r.ServiceRegistrar.RegisterService(desc, impl)
		return
	}
	d := *desc
	d.Methods = slices.Clone(desc.Methods)
	for i, m := range d.Methods {
		if m.MethodName == "GetLogicalCloud" {
			d.Methods[i].Handler = ceiling(m.Handler)
		}
	}
	r.ServiceRegistrar.RegisterService(&d, impl)
}

// ceiling answers a GET of ceilingName with a fixed logical cloud shaped
// like the benchmark's (one user, a namespace), through the same
// interceptors; any other name goes to core's handler.
func ceiling(real grpc.MethodHandler) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		in := new(corev1.GetLogicalCloudRequest)
		if err := dec(in); err != nil {
			return nil, err
		}
		if in.GetLogicalCloud() != ceilingName {
			return real(srv, ctx, func(m any) error {
				proto.Merge(m.(proto.Message), in)
				return nil
			}, ic)
		}
		h := func(context.Context, any) (any, error) { return ceilingAnswer(), nil }
		if ic == nil {
			return h(ctx, in)
		}
		return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: corev1.LogicalCloudService_GetLogicalCloud_FullMethodName}, h)
	}
}

func ceilingAnswer() *corev1.GetLogicalCloudResponse {
	return &corev1.GetLogicalCloudResponse{LogicalCloud: &corev1.LogicalCloud{
		Metadata: &typesv1.Metadata{Name: ceilingName, Description: "benchmark"},
		Spec: &corev1.LogicalCloudSpec{Namespace: ceilingName, Level: "standard", PodSecurity: "baseline",
			User: &corev1.LogicalCloudUser{UserName: "user-1", Type: "certificate"}},
		Lifecycle: &corev1.Lifecycle{Phase: "created"},
	}}
}
