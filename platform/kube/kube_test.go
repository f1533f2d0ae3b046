package kube_test

import (
	"encoding/json"
	"encoding/pem"
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

// CSR makes a PEM certificate signing request for cn.
func CSR(t *testing.T, cn string) string {
	t.Helper()
	csr, _, err := kube.NewCSR(cn)
	require.NoError(t, err)
	return string(csr)
}

func TestCheckCSR(t *testing.T) {
	t.Parallel()
	require.NoError(t, kube.CheckCSR("c", CSR(t, "user-1"), "user-1"))
	for _, bad := range []string{"/path/to/user1.csr", CSR(t, "someone-else"), CSR(t, "user-1") + "trailing"} {
		require.Equal(t, "c", fieldOf(t, kube.CheckCSR("c", bad, "user-1")))
	}
	tampered := []byte(CSR(t, "user-1"))
	block, _ := pem.Decode(tampered)
	block.Bytes[len(block.Bytes)-5] ^= 0xff
	require.Equal(t, "c", fieldOf(t, kube.CheckCSR("c", string(pem.EncodeToMemory(block)), "user-1")))
}

func TestNewCSRAndManifest(t *testing.T) {
	t.Parallel()
	csr, key, err := kube.NewCSR("user-1", "lc-1")
	require.NoError(t, err)
	require.NoError(t, kube.CheckCSR("c", string(csr), "user-1"))
	block, _ := pem.Decode(key)
	require.Equal(t, "PRIVATE KEY", block.Type)
	var m struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Request    []byte   `json:"request"`
			SignerName string   `json:"signerName"`
			Usages     []string `json:"usages"`
		} `json:"spec"`
	}
	require.NoError(t, json.Unmarshal([]byte(kube.CSRManifest("user-1", csr, kube.Labels("p", "lc"))), &m))
	require.Equal(t, "CertificateSigningRequest", m.Kind)
	require.Equal(t, "user-1", m.Metadata.Name)
	require.Equal(t, map[string]string{"dcm.io/project": "p", "dcm.io/logical-cloud": "lc"}, m.Metadata.Labels)
	require.Equal(t, csr, m.Spec.Request)
	require.Equal(t, "kubernetes.io/kube-apiserver-client", m.Spec.SignerName)
	require.Equal(t, []string{"client auth"}, m.Spec.Usages)
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
