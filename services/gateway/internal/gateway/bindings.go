package gateway

import (
	"context"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// sameAnswerServices are the services whose additional bindings answer what
// the primary binding's response_body names: their protos give
// response_body on the primary binding only, and grpc-gateway applies it
// to that binding alone, so /v2/projects/... would answer
// {"trafficIntentGroup": {...}} where /v2/project/... answers the group.
var sameAnswerServices = []protoreflect.FullName{"dcm.traffic.v1.TrafficService", "dcm.core.v1.TrafficLifecycleService"}

// sameAnswer is a runtime.ForwardResponseRewriter: an answer of
// sameAnswerServices that grpc-gateway did not cut to its response_body
// (an additional binding's) is cut as the primary binding's.
func sameAnswer(ctx context.Context, resp proto.Message) (any, error) {
	if _, ok := resp.(interface{ XXX_ResponseBody() any }); ok {
		return resp, nil
	}
	method, ok := runtime.RPCMethod(ctx)
	if !ok {
		return resp, nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(strings.ReplaceAll(strings.TrimPrefix(method, "/"), "/", ".")))
	if err != nil {
		return resp, nil
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok || !containsName(sameAnswerServices, md.Parent().FullName()) {
		return resp, nil
	}
	rule, ok := proto.GetExtension(md.Options(), annotations.E_Http).(*annotations.HttpRule)
	if !ok || rule.GetResponseBody() == "" {
		return resp, nil
	}
	m := resp.ProtoReflect()
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(rule.GetResponseBody()))
	switch {
	case fd == nil || fd.Kind() != protoreflect.MessageKind || fd.IsMap():
		return resp, nil
	case fd.IsList():
		l := m.Get(fd).List()
		out := make([]proto.Message, l.Len())
		for i := range out {
			out[i] = l.Get(i).Message().Interface()
		}
		return out, nil
	case !m.Has(fd):
		return m.NewField(fd).Message().Interface(), nil
	}
	return m.Get(fd).Message().Interface(), nil
}

func containsName(names []protoreflect.FullName, n protoreflect.FullName) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}
