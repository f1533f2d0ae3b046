package allinone_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

func TestMain(m *testing.M) {
	if os.Getenv(rsyncChildEnv) != "" {
		os.Exit(runRsyncChild())
	}
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// onHarness starts the whole program with the test clusters registered and
// a project made.
func onHarness(t testing.TB, project string) (*apitest.REST, *kubetest.Harness) {
	t.Helper()
	h := kubetest.ForTests(t, 3)
	r := apitest.NewREST(t, stacktest.Start(t))
	apitest.RegisterHarness(t, r, h)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"`+project+`"}}`)
	return r, h
}

func clientFor(t testing.TB, kubeconfig []byte) (*kubernetes.Clientset, string) {
	t.Helper()
	cc, err := clientcmd.NewClientConfigFromBytes(kubeconfig)
	require.NoError(t, err)
	cfg, err := cc.ClientConfig()
	require.NoError(t, err)
	ns, _, err := cc.Namespace()
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs, ns
}

func configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": "v"}}
}

// labelled are the kinds a logical cloud can put on a cluster.
var labelled = []struct {
	gvr        schema.GroupVersionResource
	namespaced bool
}{
	{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, false},
	{schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"}, false},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, false},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}, false},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, true},
	{schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}, true},
	{schema.GroupVersionResource{Version: "v1", Resource: "resourcequotas"}, true},
	{schema.GroupVersionResource{Version: "v1", Resource: "limitranges"}, true},
	{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, true},
	{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, true},
	{schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}, true},
}

// leftOn lists, with the cluster's admin access, every object labelled as
// the logical cloud's, in every namespace.
func leftOn(t testing.TB, c *kubetest.Cluster, project, lc string) []string {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	sel := fmt.Sprintf("%s=%s,%s=%s", kube.ProjectLabel, project, kube.LogicalCloudLabel, lc)
	var out []string
	for _, k := range labelled {
		list, err := dyn.Resource(k.gvr).List(context.Background(), metav1.ListOptions{LabelSelector: sel})
		require.NoError(t, err)
		for _, o := range list.Items {
			out = append(out, k.gvr.Resource+"/"+strings.TrimPrefix(o.GetNamespace()+"/"+o.GetName(), "/"))
		}
	}
	return out
}

// count is how many objects the logical cloud has on each cluster.
func count(t testing.TB, h *kubetest.Harness, project, lc string) map[string]int {
	out := map[string]int{}
	for _, c := range h.Clusters {
		out[c.Name] = len(leftOn(t, c, project, lc))
	}
	return out
}

const lifeLC = `{
  "metadata": {"name": "lc-1", "description": "logical cloud for the finance department"},
  "spec": {
    "namespace": "life-ns",
    "user": {
      "user-name": "user-1",
      "type": "certificate",
      "user-permissions": [
        {"permission-name": "permission-1", "apiGroups": ["stable.example.com"], "resources": ["secrets", "pods"], "verbs": ["get", "watch", "list", "create"]},
        {"permission-name": "permission-2", "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]}
      ]
    }
  }
}`

// TestLogicalCloudLifecycleOnRealClusters is the seed's whole sequence
// over REST on real clusters: create, reference clusters, add a quota,
// apply, watch, use the kubeconfigs (confined to what was granted, the
// quota enforced), update (one cluster in, one out), stop, terminate
// (nothing left on any cluster) and delete.
func TestLogicalCloudLifecycleOnRealClusters(t *testing.T) {
	r, h := onHarness(t, "life")
	lc := "/v2/projects/life/logical-clouds/lc-1"
	r.Want(201, "POST", "/v2/projects/life/logical-clouds", lifeLC)

	// Nothing to do before it is applied; no clusters yet is refused.
	r.Want(409, "POST", lc+"/update", "")
	r.Want(409, "POST", lc+"/terminate", "")
	r.Want(404, "GET", lc+"/cluster-references/cluster-1/kubeconfig", "")
	r.Want(409, "GET", lc+"/quota-usage", "")
	require.Contains(t, r.Want(409, "POST", lc+"/apply", ""), "no clusters")
	require.Equal(t, "Created", r.Status(lc).State)

	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
	r.Want(201, "POST", lc+"/cluster-providers/edge/cluster-references", `{"cluster-name":"cluster-2"}`)
	r.Want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"quota-1"},"spec":{"configmaps":3,"requests.cpu":"2"}}`)

	var applied apitest.LCStatus
	require.NoError(t, json.Unmarshal([]byte(r.Want(202, "POST", lc+"/apply", "")), &applied))
	require.Contains(t, []string{"Instantiating", "Instantiated"}, applied.State)
	again := r.Want(409, "POST", lc+"/instantiate", "")
	require.Contains(t, again, `is Instantiat`)
	require.Equal(t, "WRONG_STATE", decodeMap(t, again)["reason"], "a reason clients branch on")
	gone := r.Want(409, "DELETE", lc, "")
	require.Contains(t, gone, "terminate it")
	require.Equal(t, "WRONG_STATE", decodeMap(t, gone)["reason"])

	st := r.Settle(lc, "Instantiated")
	require.Len(t, st.Clusters, 2)
	require.Equal(t, st.Total, st.Ready)
	// namespace, its 2 NetworkPolicies, quota, LimitRange, CSR, 2 roles
	// and 2 bindings on each cluster
	require.Equal(t, 2*10, st.Total)
	for _, c := range st.Clusters {
		for _, res := range c.Resources {
			require.Equal(t, "applied", res.State, "%s %s on %s", res.Kind, res.Name, c.Name)
		}
	}
	require.Equal(t, map[string]int{"cluster-1": 10, "cluster-2": 10, "cluster-3": 0}, count(t, h, "life", "lc-1"))

	// Quota admission refuses objects until the cluster has computed the
	// quota's status: wait for it, as a user would.
	apitest.Eventually(t, "both clusters report the quota", func() bool {
		return strings.Count(r.Want(200, "GET", lc+"/quota-usage", ""), `"requests.cpu":"2"`) == 2
	})

	// The kubeconfigs work and are confined.
	kc1 := r.Kubeconfig(lc + "/cluster-references/cluster-1/kubeconfig")
	require.Equal(t, kc1, r.Kubeconfig(lc+"/cluster-providers/edge/cluster-references/cluster-1/kubeconfig"))
	ctx := context.Background()
	for _, name := range []string{"cluster-1", "cluster-2"} {
		cs, ns := clientFor(t, r.Kubeconfig(lc+"/cluster-references/"+name+"/kubeconfig"))
		require.Equal(t, "life-ns", ns)
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, configMap("made-by-user"), metav1.CreateOptions{})
		require.NoError(t, err, "create a configmap in the namespace on %s", name)
		_, err = cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		_, err = cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "list in default: %v", err)
		err = cs.CoreV1().ConfigMaps(ns).Delete(ctx, "made-by-user", metav1.DeleteOptions{})
		require.True(t, apierrors.IsForbidden(err), "delete was not granted: %v", err)
		_, err = cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "secrets are granted in stable.example.com only: %v", err)
	}
	r.Want(404, "GET", lc+"/cluster-references/cluster-3/kubeconfig", "")

	// The quota is enforced: 3 configmaps, one of which the loop above made.
	cs1, _ := clientFor(t, kc1)
	for i := range 2 {
		_, err := cs1.CoreV1().ConfigMaps("life-ns").Create(ctx, configMap(fmt.Sprintf("cm-%d", i)), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := cs1.CoreV1().ConfigMaps("life-ns").Create(ctx, configMap("one-too-many"), metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.Contains(t, err.Error(), "exceeded quota")

	var usage struct {
		Clusters []struct {
			Name   string `json:"cluster-name"`
			Quotas []struct {
				Name string            `json:"name"`
				Hard map[string]string `json:"hard"`
				Used map[string]string `json:"used"`
			} `json:"quotas"`
			Error string `json:"error"`
		} `json:"clusters"`
		Total struct {
			Hard map[string]string `json:"hard"`
			Used map[string]string `json:"used"`
		} `json:"total"`
	}
	apitest.Eventually(t, "the quota usage shows 3 + 1 configmaps", func() bool {
		require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/quota-usage", "")), &usage))
		return usage.Total.Used["configmaps"] == "4"
	})
	require.Len(t, usage.Clusters, 2)
	for _, c := range usage.Clusters {
		require.Empty(t, c.Error)
		require.Len(t, c.Quotas, 1)
		require.Equal(t, "quota-1", c.Quotas[0].Name)
		// The quota is laid over the default quota (cpu=8,memory=32Gi,pods=100).
		require.Equal(t, map[string]string{"configmaps": "3", "requests.cpu": "2", "cpu": "8", "memory": "32Gi", "pods": "100"}, c.Quotas[0].Hard)
	}
	require.Equal(t, map[string]string{"configmaps": "6", "requests.cpu": "4", "cpu": "16", "memory": "64Gi", "pods": "200"}, usage.Total.Hard)

	// Quota usage shows what was applied, not what is desired: a quota
	// added since (no /update) is not there, one removed since still is.
	quotaNames := func() []string {
		require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/quota-usage", "")), &usage))
		var names []string
		for _, c := range usage.Clusters {
			require.Empty(t, c.Error)
			for _, q := range c.Quotas {
				names = append(names, c.Name+"/"+q.Name)
			}
		}
		return names
	}
	r.Want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"quota-2"},"spec":{"pods":"5"}}`)
	require.Equal(t, []string{"cluster-1/quota-1", "cluster-2/quota-1"}, quotaNames(), "quota-2 is not applied yet")
	r.Want(204, "DELETE", lc+"/cluster-quotas/quota-1", "")
	require.Equal(t, []string{"cluster-1/quota-1", "cluster-2/quota-1"}, quotaNames(), "quota-1 is still applied")
	// Back as it was, for the update below.
	r.Want(204, "DELETE", lc+"/cluster-quotas/quota-2", "")
	r.Want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"quota-1"},"spec":{"configmaps":3,"requests.cpu":"2"}}`)

	// Update: cluster-3 in, cluster-2 out, a permission changed.
	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-3"}`)
	r.Want(204, "DELETE", lc+"/cluster-providers/edge/cluster-references/cluster-2", "")
	r.Want(200, "PUT", lc+"/user-permissions/permission-2",
		`{"permission-name":"permission-2","apiGroups":[""],"resources":["configmaps"],"verbs":["get","list","create","delete"]}`)
	r.Want(202, "POST", lc+"/update", "")
	st = r.Settle(lc, "Instantiated")
	apitest.Eventually(t, "cluster-2 is emptied", func() bool { return count(t, h, "life", "lc-1")["cluster-2"] == 0 })
	require.Equal(t, map[string]int{"cluster-1": 10, "cluster-2": 0, "cluster-3": 10}, count(t, h, "life", "lc-1"))
	cs3, _ := clientFor(t, r.Kubeconfig(lc+"/cluster-references/cluster-3/kubeconfig"))
	_, err = cs3.CoreV1().ConfigMaps("life-ns").Create(ctx, configMap("on-3"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, cs3.CoreV1().ConfigMaps("life-ns").Delete(ctx, "on-3", metav1.DeleteOptions{}), "delete is granted now")
	r.Want(404, "GET", lc+"/cluster-references/cluster-2/kubeconfig", "")
	require.Equal(t, []string{"cluster-1/quota-1", "cluster-3/quota-1"}, quotaNames(), "the emptied cluster-2 has no quota applied")

	// Stop, then terminate: everything goes, from every cluster.
	r.Want(202, "POST", lc+"/stop", "")
	var term apitest.LCStatus
	require.NoError(t, json.Unmarshal([]byte(r.Want(202, "POST", lc+"/terminate", "")), &term))
	require.Contains(t, []string{"Terminating", "Terminated"}, term.State)
	r.Settle(lc, "Terminated")
	require.Equal(t, map[string]int{"cluster-1": 0, "cluster-2": 0, "cluster-3": 0}, count(t, h, "life", "lc-1"))
	r.Want(409, "GET", lc+"/cluster-references/cluster-1/kubeconfig", "")
	r.Want(409, "POST", lc+"/terminate", "")
	r.Want(204, "DELETE", lc, "")
	r.Want(404, "GET", lc+"/status", "")
}

// TestLogicalCloudClusterDownDuringApply applies a privileged logical
// cloud with a token user while one cluster's API server is down: the
// status shows that cluster retrying, and once it is back everything
// converges. The token kubeconfig has the cluster-wide permission only.
func TestLogicalCloudClusterDownDuringApply(t *testing.T) {
	r, h := onHarness(t, "down")
	lc := "/v2/projects/down/logical-clouds/lc-2"
	r.Want(201, "POST", "/v2/projects/down/logical-clouds", `{
	  "metadata": {"name": "lc-2"},
	  "spec": {"namespace": "down-ns", "level": "privileged",
	    "user": {"user-name": "robot", "type": "token", "user-permissions": [
	      {"permission-name": "see-namespaces", "apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]},
	      {"permission-name": "pods", "namespace": "down-ns", "apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
	    ]}}}`)
	for _, c := range h.Clusters {
		r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+c.Name+`"}`)
	}

	down := h.Clusters[2]
	down.StopAPIServer()
	restarted := false
	defer func() {
		if !restarted {
			_ = down.StartAPIServer(context.Background())
		}
	}()
	r.Want(202, "POST", lc+"/apply", "")
	apitest.Eventually(t, down.Name+" is retrying", func() bool {
		st := r.Status(lc)
		for _, c := range st.Clusters {
			if c.Name == down.Name && c.State == "retrying" && c.LastError != "" {
				require.Equal(t, "Instantiating", st.State)
				return true
			}
		}
		return false
	})
	st := r.Status(lc)
	require.NotEmpty(t, st.LastErrors)
	require.Contains(t, strings.Join(st.LastErrors, "\n"), down.Name)
	// Tenants read a short cause, not the client's error with the API
	// server's address (docs/security.md "Errors to tenants").
	addr := strings.TrimPrefix(down.Server, "https://")
	require.Contains(t, strings.Join(st.LastErrors, "\n"), "unreachable")
	body := r.Want(200, "GET", lc+"/status", "")
	require.NotContains(t, body, addr)
	require.NotContains(t, body, "dial tcp")
	// The clusters that are up get it all meanwhile.
	apitest.Eventually(t, "the clusters that are up are done", func() bool {
		st := r.Status(lc)
		for _, c := range st.Clusters {
			if c.Name != down.Name && c.Ready != c.Total {
				return false
			}
		}
		return st.State == "Instantiating"
	})
	// No kubeconfig can be made for a cluster that cannot be reached.
	body = r.Want(503, "GET", lc+"/cluster-references/"+down.Name+"/kubeconfig", "")
	require.Contains(t, body, down.Name)
	require.NotContains(t, body, addr)
	require.Contains(t, body, "unreachable")

	require.NoError(t, down.StartAPIServer(context.Background()))
	restarted = true
	st = r.Settle(lc, "Instantiated")
	// namespace, its 2 NetworkPolicies, default quota, LimitRange,
	// ServiceAccount (no token Secret), ClusterRole, ClusterRoleBinding,
	// Role, RoleBinding
	require.Equal(t, 3*10, st.Total)
	require.Equal(t, st.Total, st.Ready)

	ctx := context.Background()
	for _, c := range h.Clusters {
		var kc []byte
		apitest.Eventually(t, "the token controller fills the token on "+c.Name, func() bool {
			code, b := apitest.Call(t, r.C, "GET", r.Base+lc+"/cluster-references/"+c.Name+"/kubeconfig", "")
			kc = b
			return code == 200
		})
		require.Contains(t, string(kc), "token: ")
		require.NotContains(t, string(kc), "client-key-data")
		cs, ns := clientFor(t, kc)
		require.Equal(t, "down-ns", ns)
		_, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		require.NoError(t, err, "the cluster-wide permission on %s", c.Name)
		_, err = cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		_, err = cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "%v", err)
		_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "not-allowed"}}, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "%v", err)
	}

	// Terminate while a cluster is down, stop it half way: it stays
	// Terminating, and terminating again is the way out (it resumes).
	down.StopAPIServer()
	restarted = false
	r.Want(202, "POST", lc+"/terminate", "")
	apitest.Eventually(t, "terminate is retrying on "+down.Name, func() bool {
		st := r.Status(lc)
		for _, c := range st.Clusters {
			if c.Name == down.Name && c.State == "retrying" {
				require.Equal(t, "Terminating", st.State)
				return true
			}
		}
		return false
	})
	r.Want(202, "POST", lc+"/stop", "")
	require.Equal(t, "Terminating", r.Status(lc).State)
	r.Want(409, "DELETE", lc, "")
	r.Want(202, "POST", lc+"/terminate", "")
	require.NoError(t, down.StartAPIServer(context.Background()))
	restarted = true
	r.Settle(lc, "Terminated")
	require.Equal(t, map[string]int{"cluster-1": 0, "cluster-2": 0, "cluster-3": 0}, count(t, h, "down", "lc-2"))
	r.Want(204, "DELETE", lc, "")
}

// TestAdminLogicalCloudLifecycle applies an admin logical cloud: it spans
// the clusters and puts nothing on them; there is no kubeconfig to hand
// out.
func TestAdminLogicalCloudLifecycle(t *testing.T) {
	r, h := onHarness(t, "adm")
	lc := "/v2/projects/adm/logical-clouds/ops"
	r.Want(201, "POST", "/v2/projects/adm/logical-clouds", `{"metadata":{"name":"ops"},"spec":{"level":"admin"}}`)
	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
	r.Want(202, "POST", lc+"/apply", "")
	st := r.Settle(lc, "Instantiated")
	require.Zero(t, st.Total)
	require.Equal(t, map[string]int{"cluster-1": 0, "cluster-2": 0, "cluster-3": 0}, count(t, h, "adm", "ops"))
	require.Contains(t, r.Want(409, "GET", lc+"/cluster-references/cluster-1/kubeconfig", ""), "admin")
	r.Want(409, "GET", lc+"/quota-usage", "")
	r.Want(202, "POST", lc+"/terminate", "")
	r.Settle(lc, "Terminated")
	r.Want(204, "DELETE", lc, "")
}
