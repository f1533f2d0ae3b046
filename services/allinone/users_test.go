package allinone_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
)

// TestUsersAddedAndRemoved: users of an applied logical cloud change
// after its creation, and .../update gives the change to the clusters.
// Seed 002's POST .../logical-clouds naming the logical cloud with a new
// user adds it (201, the seed's body), as POST .../users does; a
// permission created at .../user-permissions names the user it is for.
// After the update each user's own credentials hold its own rights only,
// on a real cluster; a user removed loses its binding at the next update.
// Before, the seed's request was 409 and .../users took no POST.
func TestUsersAddedAndRemoved(t *testing.T) {
	e := apitest.StartTenantsOn(t, kubetest.ForTests(t, 1), "ua")
	pa := e.ProjectAdmin("ua")
	ctx := context.Background()
	lcs := "/v2/projects/ua/logical-clouds"
	lc := lcs + "/team"
	pa.Want(201, "POST", lcs, `{"name": "team", "user": {"name": "user-1", "type": "certificate",
	  "permissions": {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}}}`)
	pa.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
	pa.Want(202, "POST", lc+"/apply", "")
	pa.Settle(lc, "Instantiated")

	// Seed 002, "Creating new users in already existing Logical cloud".
	seed := `{"name": "team", "user": {"name": "user-2", "type": "certificate",
	  "permissions": {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]},
	  "quota": {"cpu": "2", "memory": "3Gi", "pods": "20"}}}`
	added := decodeMap(t, pa.Want(201, "POST", lcs, seed))
	require.Equal(t, "team", added["name"])
	require.Equal(t, "user-2", added["user"])
	require.NotEmpty(t, added["message"])
	// The same user again, or a body that would change the logical cloud:
	// 409, saying why.
	require.Contains(t, pa.Want(409, "POST", lcs, seed), `already has user \"user-2\"`)
	require.Contains(t, pa.Want(409, "POST", lcs, `{"name": "team", "resources": {"pods": "5"}, "user": {"name": "user-9"}}`), "resources")
	require.Contains(t, pa.Want(409, "POST", lcs, `{"name": "team", "cluster-labels": "other", "user": {"name": "user-9"}}`), "cluster-labels")
	require.Contains(t, pa.Want(409, "POST", lcs, `{"name": "team", "description": "another", "user": {"name": "user-9"}}`), "another description")
	require.Contains(t, pa.Want(409, "POST", lcs, `{"name": "team"}`), "already exists")
	require.Contains(t, pa.Want(409, "POST", lcs, `{"metadata": {"name": "team"}, "spec": {"user": {"user-name": "user-9"}}}`), "exists")

	// The .../users collection checks as creation does.
	require.Contains(t, pa.Want(400, "POST", lc+"/users", `{"name": "user-3", "type": "password"}`), `"field":"type"`)
	require.Contains(t, pa.Want(400, "POST", lc+"/users", `{"name": "user-3", "permissions": {"verbs": "get"}}`), `"field":"permissions.verbs"`)
	require.Contains(t, pa.Want(409, "POST", lc+"/users", `{"name": "user-1"}`), `already has user \"user-1\"`)
	require.Equal(t, "user-3", decodeMap(t, pa.Want(201, "POST", lc+"/users", `{"name": "user-3", "type": "token"}`))["user"])
	// A permission at .../user-permissions for user-3 alone; it may name
	// only users of the logical cloud.
	require.Contains(t, pa.Want(400, "POST", lc+"/user-permissions",
		`{"permission-name": "pods", "apiGroups": [""], "resources": ["pods"], "verbs": ["list"], "users": ["user-3", "nobody"]}`), `"field":"users[1]"`)
	pa.Want(201, "POST", lc+"/user-permissions", `{"permission-name": "pods", "apiGroups": [""], "resources": ["pods"], "verbs": ["list"], "users": ["user-3"]}`)

	// Each user is shown with the permissions it holds and its quota.
	pa.Is(200, "GET", lc+"/users/user-2", "", `{"name": "user-2", "type": "certificate", "certificate": "",
	  "permissions": [{"permission-name": "user-2", "namespace": "team", "apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"], "metadata": null, "users": ["user-2"]}],
	  "quota": {"cpu": "2", "memory": "3Gi", "pods": "20"}}`)
	var names, perms3 []any
	for _, u := range decodeMap(t, pa.Want(200, "GET", lc+"/users", ""))["users"].([]any) {
		u := u.(map[string]any)
		names = append(names, u["name"])
		if u["name"] == "user-3" {
			for _, p := range u["permissions"].([]any) {
				perms3 = append(perms3, p.(map[string]any)["permission-name"])
			}
			require.Nil(t, u["quota"], "user-3 has no quota")
		}
	}
	require.Equal(t, []any{"user-1", "user-2", "user-3"}, names)
	require.Equal(t, []any{"pods"}, perms3, "user-3 holds its own permission, none of the others'")
	require.Equal(t, []any{"user-1", "user-2", "user-3"}, decodeMap(t, pa.Want(200, "GET", lc, ""))["spec"].(map[string]any)["users"])

	pa.Want(202, "POST", lc+"/update", "")
	pa.Settle(lc, "Instantiated")
	cs1, ns := clientFor(t, pa.Kubeconfig(lc+"/cluster-references/cluster-1/kubeconfig?user=user-1"))
	kc2 := pa.Kubeconfig(lc + "/cluster-references/cluster-1/kubeconfig?user=user-2")
	require.Equal(t, "dcm:ua:team:user-2", certOf(t, kc2).Subject.CommonName)
	cs2, _ := clientFor(t, kc2)
	cs3, _ := clientFor(t, pa.Kubeconfig(lc+"/cluster-references/cluster-1/kubeconfig?user=user-3"))
	_, err := cs2.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "user-2, added after apply, lists secrets with its own certificate")
	for _, c := range []struct {
		who      string
		can      func(verb, resource string) bool
		own, not []string
	}{
		{"user-1", func(v, r string) bool { return canI(t, cs1, v, r, ns) }, []string{"configmaps"}, []string{"secrets", "pods"}},
		{"user-2", func(v, r string) bool { return canI(t, cs2, v, r, ns) }, []string{"secrets"}, []string{"configmaps", "pods"}},
		{"user-3", func(v, r string) bool { return canI(t, cs3, v, r, ns) }, []string{"pods"}, []string{"configmaps", "secrets"}},
	} {
		for _, r := range c.own {
			require.True(t, c.can("list", r), "%s lists %s: its own right", c.who, r)
		}
		for _, r := range c.not {
			require.False(t, c.can("list", r), "%s lists %s: another user's right", c.who, r)
		}
	}

	// Removing user-2: its permission and quota go with it; the last user
	// stays.
	pa.Want(204, "DELETE", lc+"/users/user-2", "")
	pa.Want(404, "GET", lc+"/users/user-2", "")
	pa.Want(404, "GET", lc+"/user-permissions/user-2", "")
	pa.Want(404, "GET", lc+"/cluster-quotas/user-2-quota", "")
	require.Contains(t, pa.Want(409, "DELETE", lc+"/users", ""), `"reason":"LAST_USER"`)
	pa.Want(202, "POST", lc+"/update", "")
	pa.Settle(lc, "Instantiated")
	apitest.Eventually(t, "user-2 loses its rights", func() bool { return !canI(t, cs2, "list", "secrets", ns) })
	admin := adminOf(t, e.H.Clusters[0])
	rbs, err := admin.RbacV1().RoleBindings(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, rb := range rbs.Items {
		for _, sub := range rb.Subjects {
			require.NotContains(t, sub.Name, "user-2", "binding %s still names the removed user", rb.Name)
		}
	}
	_, err = admin.CertificatesV1().CertificateSigningRequests().Get(ctx, "dcm.ua.team.user-2", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the removed user's CertificateSigningRequest is gone: %v", err)
	require.True(t, canI(t, cs1, "list", "configmaps", ns), "user-1 keeps its rights")
	require.True(t, canI(t, cs3, "list", "pods", ns), "user-3 keeps its rights")

	// Removing spec.user's user makes the first remaining user spec.user
	// (the kubeconfig's default user).
	pa.Want(204, "DELETE", lc+"/user/user-1", "")
	spec := decodeMap(t, pa.Want(200, "GET", lc, ""))["spec"].(map[string]any)
	require.Equal(t, []any{"user-3"}, spec["users"])
	require.Equal(t, "user-3", spec["user"].(map[string]any)["user-name"])
	msg := pa.Want(409, "DELETE", lc+"/users/user-3", "")
	require.Equal(t, "LAST_USER", decodeMap(t, msg)["reason"])
	require.True(t, strings.Contains(msg, "last user"), msg)
}
