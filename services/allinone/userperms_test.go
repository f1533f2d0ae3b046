package allinone_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
)

// TestFlatBodyUsersHoldOwnPermissions: seed 002's flat body gives each
// user its own permissions. A project admin creates a logical cloud whose
// user-1 is granted configmaps and user-2 secrets and pods; on a real
// cluster, with each user's own credential, user-1 can use configmaps and
// not read secrets, user-2 secrets and not configmaps. Before permissions
// had owners every permission was bound to every user, and each user held
// the other's rights.
func TestFlatBodyUsersHoldOwnPermissions(t *testing.T) {
	e := startTenants(t, "pu")
	pa := e.ProjectAdmin("pu")
	ctx := context.Background()
	pa.Want(201, "POST", "/v2/projects/pu/logical-clouds", `{"name": "own-perms", "description": "seed 002 flat body",
	  "user": [{"name": "user-1", "type": "certificate",
	            "permissions": {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]}},
	           {"name": "user-2", "type": "certificate",
	            "permissions": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]},
	                            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}]}`)
	lc := "/v2/projects/pu/logical-clouds/own-perms"
	pa.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
	pa.Want(202, "POST", lc+"/apply", "")
	pa.Settle(lc, "Instantiated")

	kc1 := pa.Kubeconfig(lc + "/cluster-references/cluster-1/kubeconfig?user=user-1")
	kc2 := pa.Kubeconfig(lc + "/cluster-references/cluster-1/kubeconfig?user=user-2")
	require.Equal(t, "dcm:pu:own-perms:user-1", certOf(t, kc1).Subject.CommonName)
	require.Equal(t, "dcm:pu:own-perms:user-2", certOf(t, kc2).Subject.CommonName)
	cs1, ns := clientFor(t, kc1)
	cs2, ns2 := clientFor(t, kc2)
	require.Equal(t, "own-perms", ns)
	require.Equal(t, ns, ns2)

	c1 := adminOf(t, e.H.Clusters[0])
	_, err := c1.CoreV1().Secrets(ns).Create(ctx, secret("for-user-2"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c1.CoreV1().ConfigMaps(ns).Create(ctx, configMap("for-user-1"), metav1.CreateOptions{})
	require.NoError(t, err)

	// user-1: its own rights, none of user-2's.
	_, err = cs1.CoreV1().Secrets(ns).Get(ctx, "for-user-2", metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "user-1 reads the secret only user-2 was granted: %v", err)
	require.False(t, canI(t, cs1, "list", "secrets", ns), "user-1 holds user-2's secrets")
	require.False(t, canI(t, cs1, "get", "pods", ns), "user-1 holds user-2's pods")
	_, err = cs1.CoreV1().ConfigMaps(ns).Get(ctx, "for-user-1", metav1.GetOptions{})
	require.NoError(t, err, "user-1 reads configmaps: its own right")
	_, err = cs1.CoreV1().ConfigMaps(ns).Create(ctx, configMap("by-user-1"), metav1.CreateOptions{})
	require.NoError(t, err, "user-1 creates configmaps: its own right")

	// user-2: its own rights, none of user-1's.
	_, err = cs2.CoreV1().ConfigMaps(ns).Get(ctx, "for-user-1", metav1.GetOptions{})
	require.True(t, apierrors.IsForbidden(err), "user-2 reads the configmap only user-1 was granted: %v", err)
	require.False(t, canI(t, cs2, "create", "configmaps", ns), "user-2 holds user-1's configmaps")
	_, err = cs2.CoreV1().Secrets(ns).Get(ctx, "for-user-2", metav1.GetOptions{})
	require.NoError(t, err, "user-2 reads secrets: its own right")
	require.True(t, canI(t, cs2, "get", "pods", ns))

	// Each permission names the user it is granted to.
	pa.Is(200, "GET", lc+"/user-permissions", "", `[
		{"permission-name":"user-1","namespace":"own-perms","apiGroups":[""],"resources":["configmaps"],"verbs":["get","list","create"],"metadata":null,"users":["user-1"]},
		{"permission-name":"user-2-0","namespace":"own-perms","apiGroups":[""],"resources":["secrets"],"verbs":["get","list"],"metadata":null,"users":["user-2"]},
		{"permission-name":"user-2-1","namespace":"own-perms","apiGroups":[""],"resources":["pods"],"verbs":["get"],"metadata":null,"users":["user-2"]}]`)
	// A permission may only name users of the logical cloud.
	require.Contains(t, pa.Want(400, "POST", lc+"/user-permissions",
		`{"permission-name":"x","apiGroups":[""],"resources":["pods"],"verbs":["get"],"users":["user-1","nobody"]}`), `"field":"users[1]"`)
	// A permission without users (seed 000's meaning) is every user's; a
	// permission moved from user-1 to user-2 moves on the cluster at the
	// next update.
	pa.Want(201, "POST", lc+"/user-permissions", `{"permission-name":"events","apiGroups":[""],"resources":["events"],"verbs":["list"]}`)
	pa.Want(200, "PUT", lc+"/user-permissions/user-1",
		`{"permission-name":"user-1","apiGroups":[""],"resources":["configmaps"],"verbs":["get","list","create"],"users":["user-2"]}`)
	// A PUT without users (a client that does not know the field) keeps
	// the permission's users: it never widens to every user.
	pa.Is(200, "PUT", lc+"/user-permissions/user-2-1", `{"permission-name":"user-2-1","apiGroups":[""],"resources":["pods"],"verbs":["get","list"]}`,
		`{"permission-name":"user-2-1","namespace":"own-perms","apiGroups":[""],"resources":["pods"],"verbs":["get","list"],"metadata":null,"users":["user-2"]}`)
	pa.Want(202, "POST", lc+"/update", "")
	pa.Settle(lc, "Instantiated")
	require.False(t, canI(t, cs1, "list", "pods", ns), "user-1 holds user-2's pods after a PUT without users")
	apitest.Eventually(t, "user-2 holds the ConfigMap permission and user-1 not", func() bool {
		return canI(t, cs2, "list", "configmaps", ns) && !canI(t, cs1, "list", "configmaps", ns)
	})
	require.True(t, canI(t, cs1, "list", "events", ns))
	require.True(t, canI(t, cs2, "list", "events", ns))
}

func secret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"k": "v"}}
}
