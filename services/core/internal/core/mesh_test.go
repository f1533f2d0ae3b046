package core

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// TestPlanMesh: spec.service-mesh and spec.ca-root as a create stores them,
// and the bodies refused with 400 naming the field.
func TestPlanMesh(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 51)
	cases := []struct {
		name, lc string
		spec     *corev1.LogicalCloudSpec
		field    string // "" : accepted
		want     *corev1.ServiceMesh
	}{
		{name: "no mesh", lc: "lc1", spec: &corev1.LogicalCloudSpec{}},
		{name: "enabled", lc: "lc1", spec: &corev1.LogicalCloudSpec{ServiceMesh: &corev1.ServiceMesh{Enabled: true}},
			want: &corev1.ServiceMesh{Enabled: true}},
		{name: "own istio namespace and root", lc: "lc1",
			spec: &corev1.LogicalCloudSpec{ServiceMesh: &corev1.ServiceMesh{Enabled: true, Namespace: "mesh-lc1"}, CaRoot: "root-1"},
			want: &corev1.ServiceMesh{Enabled: true, Namespace: "mesh-lc1"}},
		{name: "default istio namespace too long", lc: long,
			spec: &corev1.LogicalCloudSpec{ServiceMesh: &corev1.ServiceMesh{Enabled: true}}, field: "spec.service-mesh.namespace"},
		{name: "long name with its own istio namespace", lc: long,
			spec: &corev1.LogicalCloudSpec{ServiceMesh: &corev1.ServiceMesh{Enabled: true, Namespace: "mesh"}},
			want: &corev1.ServiceMesh{Enabled: true, Namespace: "mesh"}},
		{name: "istio namespace is the workload namespace", lc: "lc1",
			spec: &corev1.LogicalCloudSpec{Namespace: "ns1", ServiceMesh: &corev1.ServiceMesh{Enabled: true, Namespace: "ns1"}}, field: "spec.service-mesh.namespace"},
		{name: "the cluster's istio-system", lc: "lc1",
			spec: &corev1.LogicalCloudSpec{ServiceMesh: &corev1.ServiceMesh{Enabled: true, Namespace: "istio-system"}}, field: "spec.service-mesh.namespace"},
		{name: "kube namespace", lc: "lc1",
			spec: &corev1.LogicalCloudSpec{ServiceMesh: &corev1.ServiceMesh{Enabled: true, Namespace: "kube-mesh"}}, field: "spec.service-mesh.namespace"},
		{name: "bad root", lc: "lc1", spec: &corev1.LogicalCloudSpec{CaRoot: "Root_1"}, field: "spec.ca-root"},
		{name: "admin with mesh", lc: "lc1",
			spec: &corev1.LogicalCloudSpec{Level: levelAdmin, ServiceMesh: &corev1.ServiceMesh{Enabled: true}}, field: "spec.service-mesh"},
		{name: "admin with root", lc: "lc1", spec: &corev1.LogicalCloudSpec{Level: levelAdmin, CaRoot: "root-1"}, field: "spec.ca-root"},
		{name: "admin with mesh off", lc: "lc1", spec: &corev1.LogicalCloudSpec{Level: levelAdmin, ServiceMesh: &corev1.ServiceMesh{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := planCreate(&corev1.CreateLogicalCloudRequest{Project: "p1", Metadata: &typesv1.Metadata{Name: tc.lc}, Spec: tc.spec},
				grants{mayGrant: true})
			if tc.field != "" {
				require.Equal(t, codes.InvalidArgument, errs.Code(err), "%v", err)
				require.Equal(t, tc.field, errs.FieldOf(status.Convert(err)))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want.GetEnabled(), p.lc.GetSpec().GetServiceMesh().GetEnabled())
			require.Equal(t, tc.want.GetNamespace(), p.lc.GetSpec().GetServiceMesh().GetNamespace())
			require.Equal(t, tc.spec.GetCaRoot(), p.lc.GetSpec().GetCaRoot())
		})
	}
}
