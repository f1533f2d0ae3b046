package allinone_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

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

// registerHarness registers the test clusters under provider "edge", each
// labelled "harness".
func registerHarness(t testing.TB, r *rest, h *kubetest.Harness) {
	t.Helper()
	r.want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
	for _, c := range h.Clusters {
		body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": c.Name},
			"spec": map[string]any{"kubeconfig": string(c.Kubeconfig), "labels": []string{"harness"}}})
		require.NoError(t, err)
		r.want(201, "POST", "/v2/cluster-providers/edge/clusters", string(body))
	}
}

// onHarness starts the whole program with the test clusters registered and
// a project made.
func onHarness(t testing.TB, project string) (*rest, *kubetest.Harness) {
	t.Helper()
	h := kubetest.ForTests(t, 3)
	r := newREST(t, stacktest.Start(t))
	registerHarness(t, r, h)
	r.want(201, "POST", "/v2/projects", `{"metadata":{"name":"`+project+`"}}`)
	return r, h
}

// lcStatus is the part of GET .../status the tests read.
type lcStatus struct {
	State      string   `json:"state"`
	Stopped    bool     `json:"stopped"`
	Ready      int      `json:"ready"`
	Total      int      `json:"total"`
	LastErrors []string `json:"last-errors"`
	Clusters   []struct {
		Provider  string `json:"cluster-provider"`
		Name      string `json:"cluster-name"`
		State     string `json:"state"`
		Ready     int    `json:"ready"`
		Total     int    `json:"total"`
		LastError string `json:"last-error"`
		Resources []struct {
			Kind      string `json:"kind"`
			Name      string `json:"name"`
			State     string `json:"state"`
			Attempts  int    `json:"attempts"`
			LastError string `json:"last-error"`
		} `json:"resources"`
	} `json:"clusters"`
}

func (r *rest) status(lc string) lcStatus {
	r.t.Helper()
	var st lcStatus
	require.NoError(r.t, json.Unmarshal([]byte(r.want(200, "GET", lc+"/status", "")), &st))
	return st
}

// watch reads GET .../status?watch=true to its end and returns every
// status it streamed.
func (r *rest) watch(lc string) []lcStatus {
	r.t.Helper()
	req, err := http.NewRequest("GET", r.base+lc+"/status?watch=true", nil)
	require.NoError(r.t, err)
	c := *r.c
	c.Timeout = 3 * time.Minute
	resp, err := c.Do(req)
	require.NoError(r.t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(r.t, 200, resp.StatusCode)
	var out []lcStatus
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line struct {
			Result *lcStatus       `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		require.NoError(r.t, json.Unmarshal(sc.Bytes(), &line), "%s", sc.Text())
		require.Nil(r.t, line.Error, "the watch failed: %s", line.Error)
		out = append(out, *line.Result)
	}
	require.NoError(r.t, sc.Err())
	require.NotEmpty(r.t, out)
	return out
}

// settle watches until the logical cloud settles and requires the state.
func (r *rest) settle(lc, want string) lcStatus {
	r.t.Helper()
	all := r.watch(lc)
	last := all[len(all)-1]
	require.Equal(r.t, want, last.State, "%+v", last)
	return last
}

// kubeconfig reads a kubeconfig and requires it to be YAML.
func (r *rest) kubeconfig(path string) []byte {
	r.t.Helper()
	resp, err := r.c.Get(r.base + path)
	require.NoError(r.t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(r.t, err)
	require.Equal(r.t, 200, resp.StatusCode, "GET %s: %s", path, b)
	require.Equal(r.t, "application/yaml", resp.Header.Get("Content-Type"))
	return b
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

// eventually polls f until it holds or a minute has gone.
func eventually(t testing.TB, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
	r.want(201, "POST", "/v2/projects/life/logical-clouds", lifeLC)

	// Nothing to do before it is applied; no clusters yet is refused.
	r.want(409, "POST", lc+"/update", "")
	r.want(409, "POST", lc+"/terminate", "")
	r.want(404, "GET", lc+"/cluster-references/cluster-1/kubeconfig", "")
	r.want(409, "GET", lc+"/quota-usage", "")
	require.Contains(t, r.want(409, "POST", lc+"/apply", ""), "no clusters")
	require.Equal(t, "Created", r.status(lc).State)

	r.want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
	r.want(201, "POST", lc+"/cluster-providers/edge/cluster-references", `{"cluster-name":"cluster-2"}`)
	r.want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"quota-1"},"spec":{"configmaps":3,"requests.cpu":"2"}}`)

	var applied lcStatus
	require.NoError(t, json.Unmarshal([]byte(r.want(202, "POST", lc+"/apply", "")), &applied))
	require.Contains(t, []string{"Instantiating", "Instantiated"}, applied.State)
	again := r.want(409, "POST", lc+"/instantiate", "")
	require.Contains(t, again, `is Instantiat`)
	require.Equal(t, "WRONG_STATE", decodeMap(t, again)["reason"], "a reason clients branch on")
	gone := r.want(409, "DELETE", lc, "")
	require.Contains(t, gone, "terminate it")
	require.Equal(t, "WRONG_STATE", decodeMap(t, gone)["reason"])

	st := r.settle(lc, "Instantiated")
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
	eventually(t, "both clusters report the quota", func() bool {
		return strings.Count(r.want(200, "GET", lc+"/quota-usage", ""), `"requests.cpu":"2"`) == 2
	})

	// The kubeconfigs work and are confined.
	kc1 := r.kubeconfig(lc + "/cluster-references/cluster-1/kubeconfig")
	require.Equal(t, kc1, r.kubeconfig(lc+"/cluster-providers/edge/cluster-references/cluster-1/kubeconfig"))
	ctx := context.Background()
	for _, name := range []string{"cluster-1", "cluster-2"} {
		cs, ns := clientFor(t, r.kubeconfig(lc+"/cluster-references/"+name+"/kubeconfig"))
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
	r.want(404, "GET", lc+"/cluster-references/cluster-3/kubeconfig", "")

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
	eventually(t, "the quota usage shows 3 + 1 configmaps", func() bool {
		require.NoError(t, json.Unmarshal([]byte(r.want(200, "GET", lc+"/quota-usage", "")), &usage))
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
		require.NoError(t, json.Unmarshal([]byte(r.want(200, "GET", lc+"/quota-usage", "")), &usage))
		var names []string
		for _, c := range usage.Clusters {
			require.Empty(t, c.Error)
			for _, q := range c.Quotas {
				names = append(names, c.Name+"/"+q.Name)
			}
		}
		return names
	}
	r.want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"quota-2"},"spec":{"pods":"5"}}`)
	require.Equal(t, []string{"cluster-1/quota-1", "cluster-2/quota-1"}, quotaNames(), "quota-2 is not applied yet")
	r.want(204, "DELETE", lc+"/cluster-quotas/quota-1", "")
	require.Equal(t, []string{"cluster-1/quota-1", "cluster-2/quota-1"}, quotaNames(), "quota-1 is still applied")
	// Back as it was, for the update below.
	r.want(204, "DELETE", lc+"/cluster-quotas/quota-2", "")
	r.want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"quota-1"},"spec":{"configmaps":3,"requests.cpu":"2"}}`)

	// Update: cluster-3 in, cluster-2 out, a permission changed.
	r.want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-3"}`)
	r.want(204, "DELETE", lc+"/cluster-providers/edge/cluster-references/cluster-2", "")
	r.want(200, "PUT", lc+"/user-permissions/permission-2",
		`{"permission-name":"permission-2","apiGroups":[""],"resources":["configmaps"],"verbs":["get","list","create","delete"]}`)
	r.want(202, "POST", lc+"/update", "")
	st = r.settle(lc, "Instantiated")
	eventually(t, "cluster-2 is emptied", func() bool { return count(t, h, "life", "lc-1")["cluster-2"] == 0 })
	require.Equal(t, map[string]int{"cluster-1": 10, "cluster-2": 0, "cluster-3": 10}, count(t, h, "life", "lc-1"))
	cs3, _ := clientFor(t, r.kubeconfig(lc+"/cluster-references/cluster-3/kubeconfig"))
	_, err = cs3.CoreV1().ConfigMaps("life-ns").Create(ctx, configMap("on-3"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, cs3.CoreV1().ConfigMaps("life-ns").Delete(ctx, "on-3", metav1.DeleteOptions{}), "delete is granted now")
	r.want(404, "GET", lc+"/cluster-references/cluster-2/kubeconfig", "")
	require.Equal(t, []string{"cluster-1/quota-1", "cluster-3/quota-1"}, quotaNames(), "the emptied cluster-2 has no quota applied")

	// Stop, then terminate: everything goes, from every cluster.
	r.want(202, "POST", lc+"/stop", "")
	var term lcStatus
	require.NoError(t, json.Unmarshal([]byte(r.want(202, "POST", lc+"/terminate", "")), &term))
	require.Contains(t, []string{"Terminating", "Terminated"}, term.State)
	r.settle(lc, "Terminated")
	require.Equal(t, map[string]int{"cluster-1": 0, "cluster-2": 0, "cluster-3": 0}, count(t, h, "life", "lc-1"))
	r.want(409, "GET", lc+"/cluster-references/cluster-1/kubeconfig", "")
	r.want(409, "POST", lc+"/terminate", "")
	r.want(204, "DELETE", lc, "")
	r.want(404, "GET", lc+"/status", "")
}

// TestLogicalCloudClusterDownDuringApply applies a privileged logical
// cloud with a token user while one cluster's API server is down: the
// status shows that cluster retrying, and once it is back everything
// converges. The token kubeconfig has the cluster-wide permission only.
func TestLogicalCloudClusterDownDuringApply(t *testing.T) {
	r, h := onHarness(t, "down")
	lc := "/v2/projects/down/logical-clouds/lc-2"
	r.want(201, "POST", "/v2/projects/down/logical-clouds", `{
	  "metadata": {"name": "lc-2"},
	  "spec": {"namespace": "down-ns", "level": "privileged",
	    "user": {"user-name": "robot", "type": "token", "user-permissions": [
	      {"permission-name": "see-namespaces", "apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list"]},
	      {"permission-name": "pods", "namespace": "down-ns", "apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
	    ]}}}`)
	for _, c := range h.Clusters {
		r.want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+c.Name+`"}`)
	}

	down := h.Clusters[2]
	down.StopAPIServer()
	restarted := false
	defer func() {
		if !restarted {
			_ = down.StartAPIServer(context.Background())
		}
	}()
	r.want(202, "POST", lc+"/apply", "")
	eventually(t, down.Name+" is retrying", func() bool {
		st := r.status(lc)
		for _, c := range st.Clusters {
			if c.Name == down.Name && c.State == "retrying" && c.LastError != "" {
				require.Equal(t, "Instantiating", st.State)
				return true
			}
		}
		return false
	})
	st := r.status(lc)
	require.NotEmpty(t, st.LastErrors)
	require.Contains(t, strings.Join(st.LastErrors, "\n"), down.Name)
	// Tenants read a short cause, not the client's error with the API
	// server's address (docs/security.md "Errors to tenants").
	addr := strings.TrimPrefix(down.Server, "https://")
	require.Contains(t, strings.Join(st.LastErrors, "\n"), "unreachable")
	body := r.want(200, "GET", lc+"/status", "")
	require.NotContains(t, body, addr)
	require.NotContains(t, body, "dial tcp")
	// The clusters that are up get it all meanwhile.
	eventually(t, "the clusters that are up are done", func() bool {
		st := r.status(lc)
		for _, c := range st.Clusters {
			if c.Name != down.Name && c.Ready != c.Total {
				return false
			}
		}
		return st.State == "Instantiating"
	})
	// No kubeconfig can be made for a cluster that cannot be reached.
	body = r.want(503, "GET", lc+"/cluster-references/"+down.Name+"/kubeconfig", "")
	require.Contains(t, body, down.Name)
	require.NotContains(t, body, addr)
	require.Contains(t, body, "unreachable")

	require.NoError(t, down.StartAPIServer(context.Background()))
	restarted = true
	st = r.settle(lc, "Instantiated")
	// namespace, its 2 NetworkPolicies, default quota, LimitRange,
	// ServiceAccount (no token Secret), ClusterRole, ClusterRoleBinding,
	// Role, RoleBinding
	require.Equal(t, 3*10, st.Total)
	require.Equal(t, st.Total, st.Ready)

	ctx := context.Background()
	for _, c := range h.Clusters {
		var kc []byte
		eventually(t, "the token controller fills the token on "+c.Name, func() bool {
			code, b := call(t, r.c, "GET", r.base+lc+"/cluster-references/"+c.Name+"/kubeconfig", "")
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
	r.want(202, "POST", lc+"/terminate", "")
	eventually(t, "terminate is retrying on "+down.Name, func() bool {
		st := r.status(lc)
		for _, c := range st.Clusters {
			if c.Name == down.Name && c.State == "retrying" {
				require.Equal(t, "Terminating", st.State)
				return true
			}
		}
		return false
	})
	r.want(202, "POST", lc+"/stop", "")
	require.Equal(t, "Terminating", r.status(lc).State)
	r.want(409, "DELETE", lc, "")
	r.want(202, "POST", lc+"/terminate", "")
	require.NoError(t, down.StartAPIServer(context.Background()))
	restarted = true
	r.settle(lc, "Terminated")
	require.Equal(t, map[string]int{"cluster-1": 0, "cluster-2": 0, "cluster-3": 0}, count(t, h, "down", "lc-2"))
	r.want(204, "DELETE", lc, "")
}

// TestAdminLogicalCloudLifecycle applies an admin logical cloud: it spans
// the clusters and puts nothing on them; there is no kubeconfig to hand
// out.
func TestAdminLogicalCloudLifecycle(t *testing.T) {
	r, h := onHarness(t, "adm")
	lc := "/v2/projects/adm/logical-clouds/ops"
	r.want(201, "POST", "/v2/projects/adm/logical-clouds", `{"metadata":{"name":"ops"},"spec":{"level":"admin"}}`)
	r.want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
	r.want(202, "POST", lc+"/apply", "")
	st := r.settle(lc, "Instantiated")
	require.Zero(t, st.Total)
	require.Equal(t, map[string]int{"cluster-1": 0, "cluster-2": 0, "cluster-3": 0}, count(t, h, "adm", "ops"))
	require.Contains(t, r.want(409, "GET", lc+"/cluster-references/cluster-1/kubeconfig", ""), "admin")
	r.want(409, "GET", lc+"/quota-usage", "")
	r.want(202, "POST", lc+"/terminate", "")
	r.settle(lc, "Terminated")
	r.want(204, "DELETE", lc, "")
}
