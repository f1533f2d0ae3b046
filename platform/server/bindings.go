package server

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// The REST URLs are declared once, in the contracts' google.api.http
// options: grpc-gateway routes them, the OpenAPI document lists them, and
// the gateway's EMCO dialect (services/gateway) and dcmctl's kinds
// (cmd/dcmctl/routes_gen.go, written by cmd/routetable) read them here.

// An HTTPBinding is one google.api.http binding of an RPC: its rule or one
// of the rule's additional_bindings.
type HTTPBinding struct {
	// RPC is the full method, "/dcm.core.v1.CoreService/CreateLogicalCloud".
	RPC string
	// Index is the binding's place: 0 the rule itself, 1... its
	// additional_bindings in the order declared.
	Index int
	// Method is the HTTP method ("GET", "POST", ...).
	Method string
	// Path is the URL template as declared: "/v2/projects/{project}/logical-clouds".
	Path string
	// Body is the message a request's body decodes into: the request for
	// body "*", the named field's message, nil for no body (or a body
	// field that is not a message).
	Body protoreflect.MessageDescriptor
}

// HTTPBindings are the bindings of every method of every registered DCM
// service (package dcm.*: the contracts whose Go packages the program
// links), by service, method and binding in the order declared. A rule
// without a method and path, or whose body names no field of the
// request, is an error.
func HTTPBindings() ([]HTTPBinding, error) {
	var svcs []protoreflect.ServiceDescriptor
	protoregistry.GlobalFiles.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		if strings.HasPrefix(string(f.Package()), "dcm.") {
			for i := range f.Services().Len() {
				svcs = append(svcs, f.Services().Get(i))
			}
		}
		return true
	})
	slices.SortFunc(svcs, func(a, b protoreflect.ServiceDescriptor) int {
		return strings.Compare(string(a.FullName()), string(b.FullName()))
	})
	var out []HTTPBinding
	for _, sd := range svcs {
		for i := range sd.Methods().Len() {
			m := sd.Methods().Get(i)
			rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)
			if rule == nil {
				continue
			}
			full := "/" + string(sd.FullName()) + "/" + string(m.Name())
			for j, r := range append([]*annotations.HttpRule{rule}, rule.GetAdditionalBindings()...) {
				b := HTTPBinding{RPC: full, Index: j}
				b.Method, b.Path = httpPattern(r)
				if b.Method == "" || b.Path == "" {
					return nil, fmt.Errorf("%s: binding %d has no method and path", full, j)
				}
				switch body := r.GetBody(); body {
				case "":
				case "*":
					b.Body = m.Input()
				default:
					fd := m.Input().Fields().ByName(protoreflect.Name(body))
					if fd == nil {
						return nil, fmt.Errorf("%s: binding %d: body %q is not a field of %s", full, j, body, m.Input().FullName())
					}
					b.Body = fd.Message()
				}
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// httpPattern is a rule's HTTP method and URL template.
func httpPattern(r *annotations.HttpRule) (method, path string) {
	switch p := r.GetPattern().(type) {
	case *annotations.HttpRule_Get:
		return "GET", p.Get
	case *annotations.HttpRule_Post:
		return "POST", p.Post
	case *annotations.HttpRule_Put:
		return "PUT", p.Put
	case *annotations.HttpRule_Patch:
		return "PATCH", p.Patch
	case *annotations.HttpRule_Delete:
		return "DELETE", p.Delete
	case *annotations.HttpRule_Custom:
		return p.Custom.GetKind(), p.Custom.GetPath()
	}
	return "", ""
}
