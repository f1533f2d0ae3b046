package gateway

import (
	"context"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// NextPageTokenHeader carries a list's next_page_token on REST: most
// collection GETs answer a bare JSON array (docs/conventions.md), which has
// no room for it. Absent on the last page.
const NextPageTokenHeader = "Next-Page-Token"

// pageHeader copies a List answer's next_page_token into the
// Next-Page-Token header (a forward-response option: it runs before the
// body is written). Wrapped answers ({"cluster-references": [...]}) carry
// it in the body as well, as "next-page-token".
func pageHeader(_ context.Context, w http.ResponseWriter, resp proto.Message) error {
	if p, ok := resp.(interface{ GetNextPageToken() string }); ok && p.GetNextPageToken() != "" {
		w.Header().Set(NextPageTokenHeader, p.GetNextPageToken())
	}
	return nil
}

// jsonFieldName is the REST name (json_name) of a field that grpc-gateway
// names by its proto name when a query parameter does not parse
// ("page_size" is "page-size" on REST); other names are kept.
func jsonFieldName(ctx context.Context, field string) string {
	method, ok := runtime.RPCMethod(ctx)
	if !ok || strings.Contains(field, ".") {
		return field
	}
	name := protoreflect.FullName(strings.ReplaceAll(strings.TrimPrefix(method, "/"), "/", "."))
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
	if err != nil {
		return field
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return field
	}
	if fd := md.Input().Fields().ByName(protoreflect.Name(field)); fd != nil {
		return fd.JSONName()
	}
	return field
}
