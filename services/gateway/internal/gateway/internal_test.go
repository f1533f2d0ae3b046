package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	_ "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	_ "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/gateway/internal/openapi"
)

// TestNoInternalRPCOnREST: no RPC of an internal service
// (server.IsInternal) is reachable over REST. grpc-gateway makes a route
// only for a method with a google.api.http annotation, so none of theirs
// may have one; and the OpenAPI document, which lists every route the
// gateway mounts, names no internal service.
func TestNoInternalRPCOnREST(t *testing.T) {
	t.Parallel()
	internal := 0
	protoregistry.GlobalFiles.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		if !strings.HasPrefix(string(f.Package()), "dcm.") {
			return true
		}
		for i := range f.Services().Len() {
			svc := f.Services().Get(i)
			for j := range svc.Methods().Len() {
				m := svc.Methods().Get(j)
				full := "/" + string(svc.FullName()) + "/" + string(m.Name())
				if !server.IsInternal(full) {
					continue
				}
				internal++
				rule, _ := proto.GetExtension(m.Options(), annotations.E_Http).(*annotations.HttpRule)
				require.Nil(t, rule, "%s has a google.api.http annotation: internal RPCs are never on REST", full)
			}
		}
		return true
	})
	require.Positive(t, internal, "the internal services are linked in")

	var doc struct {
		Tags  []struct{ Name string } `json:"tags"`
		Paths map[string]map[string]struct {
			OperationID string   `json:"operationId"`
			Tags        []string `json:"tags"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(openapi.Document, &doc))
	require.NotEmpty(t, doc.Paths)
	for _, tag := range doc.Tags {
		require.False(t, strings.HasSuffix(tag.Name, server.InternalSuffix), "tag %s", tag.Name)
	}
	for path, ops := range doc.Paths {
		for verb, op := range ops {
			svc, _, _ := strings.Cut(op.OperationID, "_")
			require.False(t, strings.HasSuffix(svc, server.InternalSuffix), "%s %s is %s", verb, path, op.OperationID)
			for _, tag := range op.Tags {
				require.False(t, strings.HasSuffix(tag, server.InternalSuffix), "%s %s is tagged %s", verb, path, tag)
			}
		}
	}
}
