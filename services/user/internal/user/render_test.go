package user_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/goldentest"
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
		Request           []byte `json:"request"`
		SignerName        string `json:"signerName"`
		ExpirationSeconds int64  `json:"expirationSeconds"`
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

// csrPEM makes a PEM certificate signing request for user of logical
// cloud lc of project, with the subject DCM expects.
func csrPEM(t *testing.T, project, lc, user string) string {
	t.Helper()
	csr, _, err := kube.NewCSR(kube.UserIdentity(project, lc, user))
	require.NoError(t, err)
	return string(csr)
}

// golden compares manifests, one a line, with testdata/name.golden.
func golden(t *testing.T, name string, manifests []string) {
	t.Helper()
	goldentest.Manifests(t, name, manifests)
}

const week = 168 * time.Hour

func TestRender(t *testing.T) {
	t.Parallel()
	aliceCSR, err := os.ReadFile("testdata/alice.csr") // CN=dcm:p:lc:alice, O=dcm:p:lc
	require.NoError(t, err)
	users := []*userv1.User{
		{Name: "alice", Type: "certificate", Certificate: string(aliceCSR)},
		{Name: "bob", Type: "token"},
	}
	perms := []*userv1.UserPermission{
		{PermissionName: "nodes", ApiGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}},
		{PermissionName: "pods", Namespace: "ns-1", ApiGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"*"}},
		{PermissionName: "sys", Namespace: "kube-system", ApiGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}},
	}
	manifests, rendered := user.Render("p", "lc", "ns-1", week, users, perms)
	golden(t, "render", manifests)
	require.Equal(t, []string{
		"CertificateSigningRequest dcm.p.lc.alice",
		"ServiceAccount ns-1/bob",
		"ClusterRole dcm.p.lc.nodes",
		"ClusterRoleBinding dcm.p.lc.nodes",
		"Role ns-1/pods",
		"RoleBinding ns-1/pods",
		"Role kube-system/dcm.p.lc.sys",
		"RoleBinding kube-system/dcm.p.lc.sys",
	}, outline(t, "p", "lc", manifests), "users first (no token Secret), then each role and its binding; names are qualified outside the logical cloud's namespace")

	csr := decode(t, manifests[0])
	require.Equal(t, aliceCSR, csr.Spec.Request)
	require.Equal(t, int64(7*24*3600), csr.Spec.ExpirationSeconds, "a week")
	require.Equal(t, "kubernetes.io/kube-apiserver-client", csr.Spec.SignerName)

	clusterRole := decode(t, manifests[2])
	require.Equal(t, "rbac.authorization.k8s.io/v1", clusterRole.APIVersion)
	require.Len(t, clusterRole.Rules, 1)
	require.Equal(t, []string{""}, clusterRole.Rules[0].APIGroups, "the core group is kept")
	require.Equal(t, []string{"get", "list"}, clusterRole.Rules[0].Verbs)
	subjects := []map[string]string{
		{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "dcm:p:lc:alice"},
		{"kind": "ServiceAccount", "name": "bob", "namespace": "ns-1"},
	}
	for i, kind := range map[int]string{3: "ClusterRole", 5: "Role", 7: "Role"} {
		b := decode(t, manifests[i])
		role := decode(t, manifests[i-1])
		require.Equal(t, map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role.Metadata.Name}, b.RoleRef)
		require.Equal(t, subjects, b.Subjects, "every user is bound, a certificate user by its identity")
	}

	require.True(t, proto.Equal(&userv1.RenderedUser{Name: "alice", Type: "certificate", CsrName: "dcm.p.lc.alice"}, rendered[0]), "%v", rendered[0])
	require.True(t, proto.Equal(&userv1.RenderedUser{Name: "bob", Type: "token", Namespace: "ns-1", ServiceAccount: "bob"}, rendered[1]), "%v", rendered[1])

	again, _ := user.Render("p", "lc", "ns-1", week, users, perms)
	require.Equal(t, manifests, again, "byte-identical")
	hour, _ := user.Render("p", "lc", "ns-1", time.Hour, users, perms)
	require.Equal(t, int64(3600), decode(t, hour[0]).Spec.ExpirationSeconds)
}

// TestRenderNamesAreUnambiguous: project team's logical cloud x-prod and
// project team-x's prod, each with user u and permissions of the same
// names, share no identity and no object name where they share a scope
// (the dashed names of before were both dcm-team-x-prod-...).
func TestRenderNamesAreUnambiguous(t *testing.T) {
	t.Parallel()
	perms := []*userv1.UserPermission{
		{PermissionName: "nodes", ApiGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{PermissionName: "sys", Namespace: "kube-system", ApiGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
	}
	render := func(project, lc string) ([]string, []map[string]string) {
		users := []*userv1.User{{Name: "u", Type: "certificate", Certificate: csrPEM(t, project, lc, "u")}}
		manifests, _ := user.Render(project, lc, "shared-ns", week, users, perms)
		return outline(t, project, lc, manifests), decode(t, manifests[2]).Subjects
	}
	a, subjectsA := render("team", "x-prod")
	b, subjectsB := render("team-x", "prod")
	require.Equal(t, []string{
		"CertificateSigningRequest dcm.team.x-prod.u",
		"ClusterRole dcm.team.x-prod.nodes", "ClusterRoleBinding dcm.team.x-prod.nodes",
		"Role kube-system/dcm.team.x-prod.sys", "RoleBinding kube-system/dcm.team.x-prod.sys",
	}, a)
	require.Equal(t, []string{
		"CertificateSigningRequest dcm.team-x.prod.u",
		"ClusterRole dcm.team-x.prod.nodes", "ClusterRoleBinding dcm.team-x.prod.nodes",
		"Role kube-system/dcm.team-x.prod.sys", "RoleBinding kube-system/dcm.team-x.prod.sys",
	}, b)
	require.Equal(t, []map[string]string{{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "dcm:team:x-prod:u"}}, subjectsA)
	require.Equal(t, []map[string]string{{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "dcm:team-x:prod:u"}}, subjectsB)
}

// TestRenderLeavesOutForeignCSRs: a CSR whose subject is not the user's
// identity (one brought before DCM scoped identities) is never sent to the
// clusters, and its user is bound to nothing.
func TestRenderLeavesOutForeignCSRs(t *testing.T) {
	t.Parallel()
	old, _, err := kube.NewCSR("carol", "lc")
	require.NoError(t, err)
	users := []*userv1.User{
		{Name: "carol", Type: "certificate", Certificate: string(old)},
		{Name: "dan", Type: "certificate", Certificate: csrPEM(t, "p", "other-lc", "dan")},
		{Name: "erin", Type: "certificate", Certificate: csrPEM(t, "p", "lc", "erin")},
	}
	perms := []*userv1.UserPermission{{PermissionName: "pods", Namespace: "ns-1", ApiGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}}
	manifests, _ := user.Render("p", "lc", "ns-1", week, users, perms)
	require.Equal(t, []string{"CertificateSigningRequest dcm.p.lc.erin", "Role ns-1/pods", "RoleBinding ns-1/pods"}, outline(t, "p", "lc", manifests))
	require.Equal(t, []map[string]string{{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "dcm:p:lc:erin"}}, decode(t, manifests[2]).Subjects)
}

// TestRenderBindsEachPermissionToItsUsers: a permission naming users is
// bound to those users only (seed 002's flat body gives each user its own
// permissions); one naming none to every user; one whose users are all
// gone to no one.
func TestRenderBindsEachPermissionToItsUsers(t *testing.T) {
	t.Parallel()
	users := []*userv1.User{
		{Name: "user-1", Type: "certificate", Certificate: csrPEM(t, "p", "lc", "user-1")},
		{Name: "user-2", Type: "certificate", Certificate: csrPEM(t, "p", "lc", "user-2")},
		{Name: "robot", Type: "token"},
	}
	perms := []*userv1.UserPermission{
		{PermissionName: "user-1", Namespace: "ns-1", ApiGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, Users: []string{"user-1"}},
		{PermissionName: "user-2", Namespace: "ns-1", ApiGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, Users: []string{"user-2"}},
		{PermissionName: "both", Namespace: "ns-1", ApiGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}, Users: []string{"robot", "user-2"}},
		{PermissionName: "all", Namespace: "ns-1", ApiGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}},
		{PermissionName: "gone", Namespace: "ns-1", ApiGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}, Users: []string{"user-9"}},
	}
	manifests, _ := user.Render("p", "lc", "ns-1", week, users, perms)
	u1 := map[string]string{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "dcm:p:lc:user-1"}
	u2 := map[string]string{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "dcm:p:lc:user-2"}
	robot := map[string]string{"kind": "ServiceAccount", "name": "robot", "namespace": "ns-1"}
	got := map[string][]map[string]string{}
	for _, m := range manifests {
		if o := decode(t, m); o.Kind == "RoleBinding" {
			got[o.Metadata.Name] = o.Subjects
		}
	}
	require.Equal(t, map[string][]map[string]string{
		"user-1": {u1},
		"user-2": {u2},
		"both":   {u2, robot},
		"all":    {u1, u2, robot},
		"gone":   {},
	}, got)
}

// TestRenderNamespaceAdmin: EMCO's "*" permission in the logical cloud's
// namespace is rendered as namespace admin below level privileged (no "*",
// no write to quotas, limit ranges or network policies), as given at
// privileged and outside the namespace.
func TestRenderNamespaceAdmin(t *testing.T) {
	t.Parallel()
	all := []string{"*"}
	raw := []any{map[string]any{"apiGroups": []any{"*"}, "resources": []any{"*"}, "verbs": []any{"*"}}}
	perms := []*userv1.UserPermission{
		{PermissionName: "all", Namespace: "ns-1", ApiGroups: all, Resources: all, Verbs: all},
		{PermissionName: "other", Namespace: "ns-2", ApiGroups: all, Resources: all, Verbs: all},
	}
	writes := []string{"create", "update", "patch", "delete", "deletecollection", "*", "escalate", "bind", "impersonate"}
	std := user.RenderAt("standard", "ns-1", perms)
	role := decode(t, std[0])
	require.Equal(t, "ns-1", role.Metadata.Namespace)
	require.NotEmpty(t, role.Rules)
	for _, r := range role.Rules {
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs} {
			require.NotContains(t, list, "*", "%+v", r)
		}
		for _, res := range r.Resources {
			if slices.Contains([]string{"resourcequotas", "limitranges", "networkpolicies", "namespaces"}, res) {
				for _, v := range r.Verbs {
					require.NotContains(t, writes, v, "%s %s", v, res)
				}
			}
		}
	}
	require.Equal(t, raw, rulesOf(t, std[2]), "outside the namespace: as given")
	priv := user.RenderAt("privileged", "ns-1", perms)
	require.Equal(t, raw, rulesOf(t, priv[0]), "privileged: as given")
}

// rulesOf is a manifest's rules as JSON values.
func rulesOf(t *testing.T, manifest string) []any {
	var m struct {
		Rules []any `json:"rules"`
	}
	require.NoError(t, json.Unmarshal([]byte(manifest), &m))
	return m.Rules
}
