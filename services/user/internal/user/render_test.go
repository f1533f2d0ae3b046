package user_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/services/user/internal/user"
)

// object is the part of a rendered manifest the tests look at.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Type  string `json:"type"`
	Rules []struct {
		APIGroups []string `json:"apiGroups"`
		Resources []string `json:"resources"`
		Verbs     []string `json:"verbs"`
	} `json:"rules"`
	RoleRef  map[string]string   `json:"roleRef"`
	Subjects []map[string]string `json:"subjects"`
	Spec     struct {
		Request []byte `json:"request"`
	} `json:"spec"`
}

func decode(t *testing.T, manifest string) object {
	t.Helper()
	var o object
	require.NoError(t, json.Unmarshal([]byte(manifest), &o), manifest)
	return o
}

// outline is each manifest's kind and [namespace/]name, in order; every
// object must carry the logical cloud's labels.
func outline(t *testing.T, project, lc string, manifests []string) []string {
	t.Helper()
	out := make([]string, 0, len(manifests))
	for _, m := range manifests {
		o := decode(t, m)
		require.Equal(t, kube.Labels(project, lc), o.Metadata.Labels, "labels of %s", m)
		out = append(out, o.Kind+" "+strings.TrimPrefix(o.Metadata.Namespace+"/"+o.Metadata.Name, "/"))
	}
	return out
}

func csrPEM(t *testing.T, cn string) string {
	t.Helper()
	csr, _, err := kube.NewCSR(cn)
	require.NoError(t, err)
	return string(csr)
}

func TestRender(t *testing.T) {
	t.Parallel()
	users := []*userv1.User{
		{Name: "alice", Type: "certificate", Certificate: csrPEM(t, "alice")},
		{Name: "bob", Type: "token"},
	}
	perms := []*userv1.UserPermission{
		{PermissionName: "nodes", ApiGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}},
		{PermissionName: "pods", Namespace: "ns-1", ApiGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"*"}},
		{PermissionName: "sys", Namespace: "kube-system", ApiGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}},
	}
	manifests, rendered := user.Render("p", "lc", "ns-1", users, perms)
	require.Equal(t, []string{
		"CertificateSigningRequest dcm-p-lc-alice",
		"ServiceAccount ns-1/bob",
		"Secret ns-1/bob-token",
		"ClusterRole dcm-p-lc-nodes",
		"ClusterRoleBinding dcm-p-lc-nodes",
		"Role ns-1/pods",
		"RoleBinding ns-1/pods",
		"Role kube-system/dcm-p-lc-sys",
		"RoleBinding kube-system/dcm-p-lc-sys",
	}, outline(t, "p", "lc", manifests), "users first, then each role and its binding; names are qualified outside the logical cloud's namespace")

	require.Equal(t, []byte(users[0].GetCertificate()), decode(t, manifests[0]).Spec.Request)
	secret := decode(t, manifests[2])
	require.Equal(t, "kubernetes.io/service-account-token", secret.Type)
	require.Equal(t, map[string]string{"kubernetes.io/service-account.name": "bob"}, secret.Metadata.Annotations)

	clusterRole := decode(t, manifests[3])
	require.Equal(t, "rbac.authorization.k8s.io/v1", clusterRole.APIVersion)
	require.Len(t, clusterRole.Rules, 1)
	require.Equal(t, []string{""}, clusterRole.Rules[0].APIGroups, "the core group is kept")
	require.Equal(t, []string{"get", "list"}, clusterRole.Rules[0].Verbs)
	subjects := []map[string]string{
		{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
		{"kind": "ServiceAccount", "name": "bob", "namespace": "ns-1"},
	}
	for i, kind := range map[int]string{4: "ClusterRole", 6: "Role", 8: "Role"} {
		b := decode(t, manifests[i])
		role := decode(t, manifests[i-1])
		require.Equal(t, map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role.Metadata.Name}, b.RoleRef)
		require.Equal(t, subjects, b.Subjects, "every user is bound")
	}

	require.True(t, proto.Equal(&userv1.RenderedUser{Name: "alice", Type: "certificate", CsrName: "dcm-p-lc-alice"}, rendered[0]), "%v", rendered[0])
	require.True(t, proto.Equal(&userv1.RenderedUser{Name: "bob", Type: "token", Namespace: "ns-1", ServiceAccount: "bob", TokenSecret: "bob-token"}, rendered[1]), "%v", rendered[1])

	again, _ := user.Render("p", "lc", "ns-1", users, perms)
	require.Equal(t, manifests, again, "byte-identical")
}
