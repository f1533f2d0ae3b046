package kube_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
)

func fieldOf(t *testing.T, err error) string {
	t.Helper()
	require.Equal(t, codes.InvalidArgument, errs.Code(err), "%v", err)
	return errs.FieldOf(errs.ToStatus(err))
}

func TestCheckRule(t *testing.T) {
	t.Parallel()
	require.NoError(t, kube.CheckRule("p", []string{"", "apps", "stable.example.com", "*"}, []string{"pods", "pods/log", "*", "deployments/scale"}, []string{"get", "watch", "*"}))
	for _, c := range []struct {
		groups, resources, verbs []string
		field                    string
	}{
		{nil, []string{"pods"}, []string{"get"}, "p.apiGroups"},
		{[]string{"Apps"}, []string{"pods"}, []string{"get"}, "p.apiGroups[0]"},
		{[]string{""}, nil, []string{"get"}, "p.resources"},
		{[]string{""}, []string{"pods", "Pods"}, []string{"get"}, "p.resources[1]"},
		{[]string{""}, []string{"pods"}, nil, "p.verbs"},
		{[]string{""}, []string{"pods"}, []string{"get", "fly"}, "p.verbs[1]"},
	} {
		require.Equal(t, c.field, fieldOf(t, kube.CheckRule("p", c.groups, c.resources, c.verbs)))
	}
}

func TestParseHard(t *testing.T) {
	t.Parallel()
	spec, err := structpb.NewStruct(map[string]any{
		"cpu": "2000m", "limits.memory": "1Gi", "requests.nvidia.com/gpu": 2, "dummy/dummyResource": 100, "pods": 0.5,
	})
	require.NoError(t, err)
	hard, err := kube.ParseHard("spec", spec)
	require.NoError(t, err)
	require.Equal(t, []kube.Amount{
		{Resource: "cpu", Quantity: "2"}, {Resource: "dummy/dummyResource", Quantity: "100"},
		{Resource: "limits.memory", Quantity: "1Gi"}, {Resource: "pods", Quantity: "500m"},
		{Resource: "requests.nvidia.com/gpu", Quantity: "2"},
	}, hard, "canonical quantities, ordered by resource; numbers accepted")
	require.Equal(t, "1Gi", kube.HardStruct(hard).GetFields()["limits.memory"].GetStringValue())

	for in, field := range map[string]string{
		`{"cpu": "two"}`:           "spec.cpu",
		`{"cpu": "-1"}`:            "spec.cpu",
		`{"cpu": true}`:            "spec.cpu",
		`{"cpu": {"a": 1}}`:        "spec.cpu",
		`{"bad resource!": 1}`:     "spec.bad resource!",
		`{"memory": "1Gi", "": 1}`: "spec.",
	} {
		s := &structpb.Struct{}
		require.NoError(t, s.UnmarshalJSON([]byte(in)))
		_, err := kube.ParseHard("spec", s)
		require.Equal(t, field, fieldOf(t, err), in)
	}

	def, err := kube.ParseHardText("DCM_DEFAULT_QUOTA", " cpu=8, memory=32Gi ,pods=100")
	require.NoError(t, err)
	require.Len(t, def, 3)
	_, err = kube.ParseHardText("DCM_DEFAULT_QUOTA", "cpu")
	require.Equal(t, "DCM_DEFAULT_QUOTA", fieldOf(t, err))
	none, err := kube.ParseHardText("DCM_DEFAULT_QUOTA", "")
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestPermissionNamespace(t *testing.T) {
	t.Parallel()
	ns, err := kube.PermissionNamespace("f", kube.LevelStandard, "ns-1", "")
	require.NoError(t, err)
	require.Equal(t, "ns-1", ns, "a standard user's rule is in its namespace")
	_, err = kube.PermissionNamespace("f", kube.LevelStandard, "ns-1", "kube-system")
	require.Equal(t, "f", fieldOf(t, err))
	ns, err = kube.PermissionNamespace("f", kube.LevelPrivileged, "ns-1", "")
	require.NoError(t, err)
	require.Empty(t, ns, "privileged: empty is cluster-wide")
	_, err = kube.PermissionNamespace("f", kube.LevelAdmin, "", "")
	require.Equal(t, codes.FailedPrecondition, errs.Code(err))
}

func TestManifest(t *testing.T) {
	t.Parallel()
	m := kube.Manifest("v1", "Secret", kube.Meta{
		Name: "u-token", Namespace: "ns-1", Labels: kube.Labels("p", "lc"),
		Annotations: map[string]string{"kubernetes.io/service-account.name": "u"},
	}, map[string]any{"type": "kubernetes.io/service-account-token"})
	require.JSONEq(t, `{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "u-token", "namespace": "ns-1",
 "labels": {"dcm.io/project": "p", "dcm.io/logical-cloud": "lc"},
 "annotations": {"kubernetes.io/service-account.name": "u"}}, "type": "kubernetes.io/service-account-token"}`, m)
	require.Equal(t, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns-1"}}`,
		kube.Manifest("v1", "Namespace", kube.Meta{Name: "ns-1"}, nil), "no empty namespace, labels or annotations; keys sorted")
}
