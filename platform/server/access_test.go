package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	accessv1 "github.com/dcm-project/dcm/gen/dcm/access/v1"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
)

// The hand-registered services of these tests declare their callers in a
// descriptor registered here, as generated code does for the real ones:
// test.Probe and dcm.test.v1.EchoService are public (the gateway, admins),
// EchoInternalService is core's, EchoAdminService admins' alone,
// EchoUndeclaredService declares nobody,
// and EchoService/Override admits the quota service alone.
func init() {
	callers := func(c *accessv1.Callers) *descriptorpb.ServiceOptions {
		o := &descriptorpb.ServiceOptions{}
		if c != nil {
			proto.SetExtension(o, accessv1.E_DefaultCallers, c)
		}
		return o
	}
	method := func(name string, c *accessv1.Callers) *descriptorpb.MethodDescriptorProto {
		m := &descriptorpb.MethodDescriptorProto{Name: proto.String(name),
			InputType: proto.String(".google.protobuf.Struct"), OutputType: proto.String(".google.protobuf.Empty")}
		if c != nil {
			m.Options = &descriptorpb.MethodOptions{}
			proto.SetExtension(m.Options, accessv1.E_Callers, c)
		}
		return m
	}
	public := &accessv1.Callers{Services: []string{"gateway"}, Admin: true}
	for _, f := range []*descriptorpb.FileDescriptorProto{{
		Name: proto.String("test/probe.proto"), Package: proto.String("test"), Syntax: proto.String("proto3"),
		Dependency: []string{"google/protobuf/struct.proto", "google/protobuf/empty.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: proto.String("Probe"), Options: callers(public),
			Method: []*descriptorpb.MethodDescriptorProto{method("Call", nil)}}},
	}, {
		Name: proto.String("dcm/test/v1/echo.proto"), Package: proto.String("dcm.test.v1"), Syntax: proto.String("proto3"),
		Dependency: []string{"google/protobuf/struct.proto", "google/protobuf/empty.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{
			{Name: proto.String("EchoService"), Options: callers(public), Method: []*descriptorpb.MethodDescriptorProto{
				method("Call", nil), method("Override", &accessv1.Callers{Services: []string{"quota"}})}},
			{Name: proto.String("EchoInternalService"), Options: callers(&accessv1.Callers{Services: []string{"core"}}),
				Method: []*descriptorpb.MethodDescriptorProto{method("Call", nil)}},
			{Name: proto.String("EchoAdminService"), Options: callers(&accessv1.Callers{Admin: true}),
				Method: []*descriptorpb.MethodDescriptorProto{method("Call", nil)}},
			{Name: proto.String("EchoUndeclaredService"), Options: callers(nil),
				Method: []*descriptorpb.MethodDescriptorProto{method("Call", nil)}},
		},
	}} {
		fd, err := protodesc.NewFile(f, protoregistry.GlobalFiles)
		if err != nil {
			panic(err)
		}
		if err := protoregistry.GlobalFiles.RegisterFile(fd); err != nil {
			panic(err)
		}
	}
}

// TestMayCall: the allow-lists as declared: a program by its name, the
// all-in-one program wherever any program is named, admins where
// admitted, a method's own callers over its service's; nobody on an
// undeclared or unknown method; health and reflection to programs and
// admins; tenants and project-scoped certificates nowhere.
func TestMayCall(t *testing.T) {
	t.Parallel()
	svc := func(name string) pki.Identity { return pki.Identity{Subject: name, Role: pki.RoleService} }
	admin := pki.Identity{Subject: "root", Role: pki.RoleAdmin}
	const (
		public    = "/dcm.test.v1.EchoService/Call"
		override  = "/dcm.test.v1.EchoService/Override"
		internal  = "/dcm.test.v1.EchoInternalService/Call"
		undecl    = "/dcm.test.v1.EchoUndeclaredService/Call"
		adminOnly = "/dcm.test.v1.EchoAdminService/Call"
		unknown   = "/dcm.test.v1.Nothing/Call"
		health    = "/grpc.health.v1.Health/Check"
		reflectv1 = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	)
	cases := []struct {
		id     pki.Identity
		method string
		want   bool
	}{
		{svc("gateway"), public, true},
		{svc("core"), public, false},
		{svc(pki.AllInOne), public, true},
		{admin, public, true},
		{svc("quota"), override, true},
		{svc("gateway"), override, false},
		{admin, override, false},
		{svc(pki.AllInOne), override, true},
		{svc("core"), internal, true},
		{svc("gateway"), internal, false},
		{admin, internal, false},
		{svc(pki.AllInOne), internal, true},
		{svc(pki.AllInOne), undecl, false},
		{svc(pki.AllInOne), adminOnly, true},
		{svc("gateway"), adminOnly, false},
		{admin, adminOnly, true},
		{admin, undecl, false},
		{svc(pki.AllInOne), unknown, false},
		{svc("gateway"), health, true},
		{admin, reflectv1, true},
		{pki.Identity{Subject: "t", Role: pki.RoleReader}, health, false},
		{pki.Identity{Subject: "t", Role: pki.RoleProjectAdmin, Project: "p"}, public, false},
		{pki.Identity{Subject: "root", Role: pki.RoleAdmin, Project: "p"}, public, false},
		{pki.Identity{Subject: "gateway", Role: pki.RoleService, Project: "p"}, public, false},
	}
	for _, c := range cases {
		require.Equal(t, c.want, server.MayCall(c.id, c.method), "%+v on %s", c.id, c.method)
	}
	_, ok := server.CallersOf(undecl)
	require.False(t, ok, "a service with no callers declares none")
}
