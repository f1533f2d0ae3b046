package server

import (
	"slices"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	accessv1 "github.com/dcm-project/dcm/gen/dcm/access/v1"
	"github.com/dcm-project/dcm/platform/pki"
)

// Who may call what over gRPC is declared in the contract: every service
// has (dcm.access.v1.default_callers), every method may replace it
// (dcm.access.v1.callers). The lists are read from the registered
// descriptors by full method name and kept; a method that declares none,
// or whose descriptor is not registered, is refused to everyone (fail
// closed). docs/security.md's table is generated from the same options
// (cmd/calltable).

// openServices are served to every peer the server authenticates, a DCM
// program or an admin: health and reflection, which say what is served,
// not anything stored.
var openServices = map[string]bool{
	"grpc.health.v1.Health":                    true,
	"grpc.reflection.v1.ServerReflection":      true,
	"grpc.reflection.v1alpha.ServerReflection": true,
}

// callersCache holds each full method name's callers (nil: none declared).
var callersCache sync.Map

// CallersOf returns who may call fullMethod ("/dcm.user.v1.UserService/GetUser"):
// the method's own callers option, else its service's default_callers.
// False if neither is declared or the method is unknown.
func CallersOf(fullMethod string) (*accessv1.Callers, bool) {
	if c, ok := callersCache.Load(fullMethod); ok {
		cs, _ := c.(*accessv1.Callers)
		return cs, cs != nil
	}
	cs := lookupCallers(fullMethod)
	callersCache.Store(fullMethod, cs)
	return cs, cs != nil
}

func lookupCallers(fullMethod string) *accessv1.Callers {
	svc, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return nil
	}
	if opts := md.Options(); opts != nil && proto.HasExtension(opts, accessv1.E_Callers) {
		c, _ := proto.GetExtension(opts, accessv1.E_Callers).(*accessv1.Callers)
		return c
	}
	if opts := sd.Options(); opts != nil && proto.HasExtension(opts, accessv1.E_DefaultCallers) {
		c, _ := proto.GetExtension(opts, accessv1.E_DefaultCallers).(*accessv1.Callers)
		return c
	}
	return nil
}

// IsOpen says whether fullMethod is served to every authenticated peer
// (health, reflection).
func IsOpen(fullMethod string) bool {
	svc, _, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	return openServices[svc]
}

// MayCall says whether a peer whose certificate carries id may call
// fullMethod: a DCM program named in the method's callers, an admin where
// the callers admit admins, any of them on the open services. The
// all-in-one program (pki.AllInOne) may call every method that declares
// callers: it is every service in one process, on a data dir that also
// holds the admin certificate, so no boundary lies between it and them;
// a method that declares none is refused to it too. Roles are global
// here: a certificate scoped to a project is a tenant's.
func MayCall(id pki.Identity, fullMethod string) bool {
	if id.Project != "" || (id.Role != pki.RoleService && id.Role != pki.RoleAdmin) {
		return false
	}
	if IsOpen(fullMethod) {
		return true
	}
	c, ok := CallersOf(fullMethod)
	if !ok {
		return false
	}
	if id.Role == pki.RoleAdmin {
		return c.GetAdmin()
	}
	if id.Subject == pki.AllInOne {
		return len(c.GetServices()) > 0 || c.GetAdmin()
	}
	return slices.Contains(c.GetServices(), id.Subject)
}
