package core

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// seedControlPlaneBody is seed 002's POST .../logical-clouds/control-plane
// body with valid names and no CSR.
const seedControlPlaneBody = `{"name": "logical-cloud-1", "namespace": "logical-cloud-1-istio-system",
 "ca-cert": "", "ca-key": "", "root-cert": "", "cert-chain": "",
 "user": {"name": "user-2", "type": "certificate",
  "permissions": {"apiGroups": ["stable.example.com"], "resources": ["secrets", "pods"], "verbs": ["get", "watch", "list", "create"]},
  "quota": {"cpu": "200", "memory": "300Gi", "pods": "200"}}}`

func meshBody(t *testing.T, body string) *corev1.CreateMeshLogicalCloudRequest {
	t.Helper()
	req := &corev1.CreateMeshLogicalCloudRequest{}
	require.NoError(t, protojson.Unmarshal([]byte(body), req))
	req.Project = "p1"
	return req
}

// TestPlanMeshCloud: the control-plane body plans the logical cloud the
// flat body would, with the mesh on in the body's namespace.
func TestPlanMeshCloud(t *testing.T) {
	t.Parallel()
	p, err := planMeshCloud(meshBody(t, seedControlPlaneBody), grants{})
	require.NoError(t, err)
	spec := p.lc.GetSpec()
	require.Equal(t, "logical-cloud-1", p.lc.GetMetadata().GetName())
	require.Equal(t, "logical-cloud-1", spec.GetNamespace())
	require.Equal(t, levelStandard, spec.GetLevel())
	require.True(t, spec.GetServiceMesh().GetEnabled())
	require.Equal(t, "logical-cloud-1-istio-system", spec.GetServiceMesh().GetNamespace())
	require.Equal(t, "user-2", spec.GetUser().GetUserName())
	require.Len(t, p.users, 1)
	require.Len(t, p.perms, 1)
	require.Equal(t, "user-2", p.perms[0].GetPermissionName())
	require.Equal(t, []string{"stable.example.com"}, p.perms[0].GetApiGroups())
	require.Len(t, p.quotas, 1)
	require.Equal(t, "user-2-quota", p.quotas[0].GetMetadata().GetName())

	p, err = planMeshCloud(meshBody(t, `{"name": "lc2"}`), grants{})
	require.NoError(t, err)
	require.True(t, p.lc.GetSpec().GetServiceMesh().GetEnabled())
	require.Empty(t, p.lc.GetSpec().GetServiceMesh().GetNamespace(), "the default, <name>-istio-system")
	require.Equal(t, "lc2", p.lc.GetSpec().GetUser().GetUserName(), "the flat body's default user")
}

// TestPlanMeshCloudRefused: 400 naming the body's field.
func TestPlanMeshCloudRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body, field string }{
		{"istio namespace is the logical cloud's", `{"name": "lc1", "namespace": "lc1"}`, "namespace"},
		{"the cluster's istio-system", `{"name": "lc1", "namespace": "istio-system"}`, "namespace"},
		{"default namespace too long", `{"name": "` + strings.Repeat("a", 51) + `"}`, "namespace"},
		{"bad name", `{"name": "Logical cloud-1"}`, "name"},
		{"unknown user field", `{"name": "lc1", "user": {"name": "u1", "bogus": 1}}`, "user[0].bogus"},
		{"bad quota", `{"name": "lc1", "user": {"name": "u1", "quota": {"cpu": "lots"}}}`, "user[0].quota"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := planMeshCloud(meshBody(t, tc.body), grants{})
			require.Equal(t, codes.InvalidArgument, errs.Code(err), "%v", err)
			require.Contains(t, errs.FieldOf(status.Convert(err)), tc.field, "%v", err)
		})
	}
}

// TestMeshBodyParts: which fields only a new logical cloud takes, and when
// the body carries a CA of its own.
func TestMeshBodyParts(t *testing.T) {
	t.Parallel()
	require.Equal(t, "user", newCloudOnly(meshBody(t, seedControlPlaneBody)))
	require.Empty(t, newCloudOnly(meshBody(t, `{"name": "lc1", "namespace": "n", "user": null}`)))
	require.Equal(t, "resources", newCloudOnly(meshBody(t, `{"name": "lc1", "resources": {"cpu": "1"}}`)))
	require.Equal(t, "cluster-labels", newCloudOnly(meshBody(t, `{"name": "lc1", "cluster-labels": "edge"}`)))
	require.False(t, customCA(meshBody(t, seedControlPlaneBody)), "empty CA fields: cadist's intermediates")
	require.True(t, customCA(meshBody(t, `{"name": "lc1", "ca-key": "x"}`)), "any CA field: the service mesh service checks all four")
}
