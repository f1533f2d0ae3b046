package core

import (
	"testing"

	"github.com/stretchr/testify/require"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
)

// TestSamePermissions: a PUT's permissions are the logical cloud's when
// they are the same set (order aside), every field equal, a namespace left
// empty being the one it would get.
func TestSamePermissions(t *testing.T) {
	t.Parallel()
	perm := func(name, ns string, verbs ...string) *userv1.UserPermission {
		return &userv1.UserPermission{PermissionName: name, Namespace: ns, ApiGroups: []string{""}, Resources: []string{"pods"}, Verbs: verbs}
	}
	std := &corev1.LogicalCloudSpec{Level: levelStandard, Namespace: "ns"}
	priv := &corev1.LogicalCloudSpec{Level: levelPrivileged, Namespace: "ns"}
	now := []*userv1.UserPermission{perm("a", "ns", "get"), perm("b", "ns", "list")}
	withMD := perm("a", "ns", "get")
	withMD.Metadata = &typesv1.Metadata{Name: "a", Description: "d"}
	for _, tc := range []struct {
		name string
		spec *corev1.LogicalCloudSpec
		in   []*userv1.UserPermission
		same bool
	}{
		{"as shown", std, []*userv1.UserPermission{perm("a", "ns", "get"), perm("b", "ns", "list")}, true},
		{"another order", std, []*userv1.UserPermission{perm("b", "ns", "list"), perm("a", "ns", "get")}, true},
		{"namespace left empty", std, []*userv1.UserPermission{perm("a", "", "get"), perm("b", "ns", "list")}, true},
		{"empty is cluster-wide when privileged", priv, []*userv1.UserPermission{perm("a", "", "get"), perm("b", "ns", "list")}, false},
		{"another verb", std, []*userv1.UserPermission{perm("a", "ns", "get"), perm("b", "ns", "get")}, false},
		{"one less", std, []*userv1.UserPermission{perm("a", "ns", "get")}, false},
		{"one more", std, []*userv1.UserPermission{perm("a", "ns", "get"), perm("b", "ns", "list"), perm("c", "ns", "list")}, false},
		{"a name twice", std, []*userv1.UserPermission{perm("a", "ns", "get"), perm("a", "ns", "get")}, false},
		{"another name", std, []*userv1.UserPermission{perm("a", "ns", "get"), perm("c", "ns", "list")}, false},
		{"metadata", std, []*userv1.UserPermission{withMD, perm("b", "ns", "list")}, false},
	} {
		require.Equal(t, tc.same, samePermissions(tc.spec, now, tc.in), tc.name)
		err := keepsPermissions(tc.spec, now, tc.in)
		if tc.same {
			require.NoError(t, err, tc.name)
		} else {
			require.ErrorContains(t, err, "spec.user.user-permissions", tc.name)
		}
	}
}
