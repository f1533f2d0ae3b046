package servicemesh_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	"github.com/dcm-project/dcm/platform/goldentest"
)

// golden compares msg, as stable indented JSON, with testdata/name.golden
// (protojson's own spacing varies on purpose).
func golden(t *testing.T, name string, msg proto.Message) {
	t.Helper()
	b, err := protojson.Marshal(msg)
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	got, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	goldentest.Check(t, name, append(got, '\n'))
}

// TestDocumentGolden: a 2-cluster mesh logical cloud with (deterministic)
// real certificates from the fake cadist; the stored document byte for
// byte — its digests cover every rendered manifest, the cacerts Secret
// with its key included, so any change of the rendering shows here too.
func TestDocumentGolden(t *testing.T) {
	t.Parallel()
	c := serve(t, newFakeCadist(t))
	ctx := context.Background()
	_, err := c.in.RenderControlPlanes(ctx, meshRequest("lc1"))
	require.NoError(t, err)
	doc, err := c.pub.GetServiceMesh(ctx, &servicemeshv1.GetServiceMeshRequest{Project: "p1", LogicalCloud: "lc1"})
	require.NoError(t, err)
	golden(t, "document-lc1", doc.GetServiceMesh())
}
