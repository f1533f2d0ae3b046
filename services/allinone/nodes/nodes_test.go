package nodes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
)

// agnhost is Kubernetes' e2e helper image, as make images builds it.
const agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.53"

// TestTenantNetworkIsolationOnANode: two projects' logical clouds share a
// cluster with a real node. Each tenant runs pods through its own
// kubeconfig; a pod reaches pods of its own logical cloud, not the other
// project's, in either direction (the NetworkPolicies DCM renders,
// enforced by the node's kube-router). Once a logical cloud opens ingress
// from a sibling of its project, the sibling connects and the other
// project still does not. After terminate, none of the tenant's policies,
// pods or namespace is left.
func TestTenantNetworkIsolationOnANode(t *testing.T) {
	e := apitest.StartTenantsOn(t, kubetest.ForTestsWithNodes(t, 1), "net-a", "net-b")
	c, r := e.H.Clusters[0], e.Admin
	a := e.TenantLC("net-a", "web", "net-a-web", "alice", "cluster-1")
	sib := e.TenantLC("net-a", "jobs", "net-a-jobs", "alice", "cluster-1")
	b := e.TenantLC("net-b", "web", "net-b-web", "bob", "cluster-1")
	lcs := []string{a, sib, b}
	for _, lc := range lcs {
		// Reading DCM's policies takes a permission that grants it;
		// writing them none can grant (below level privileged).
		r.Want(201, "POST", lc+"/user-permissions", `{"permission-name":"netpol","apiGroups":["networking.k8s.io"],"resources":["networkpolicies"],"verbs":["get","list","watch"]}`)
		r.Want(202, "POST", lc+"/apply", "")
	}
	for _, lc := range lcs {
		r.Settle(lc, "Instantiated")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// Each tenant runs a server and a client in its namespace with its own
	// kubeconfig.
	dir := t.TempDir()
	kubeconfigs := map[string]string{}
	for _, lc := range lcs {
		p := filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(lc, "/v2/projects/"), "/", "-")+".kubeconfig")
		require.NoError(t, os.WriteFile(p, r.Kubeconfig(lc+"/cluster-references/cluster-1/kubeconfig"), 0o600))
		kubeconfigs[lc] = p
	}
	tenant := func(lc string, args ...string) (string, error) {
		out, err := c.KubectlAs(ctx, kubeconfigs[lc], args...)
		return strings.TrimSpace(out), err
	}
	ns := map[string]string{a: "net-a-web", sib: "net-a-jobs", b: "net-b-web"}
	for _, lc := range lcs {
		for _, pod := range [][]string{
			{"run", "server", "--image=" + agnhost, "--image-pull-policy=Never", "--", "netexec", "--http-port=8080"},
			{"run", "client", "--image=" + agnhost, "--image-pull-policy=Never", "--", "pause"},
		} {
			_, err := tenant(lc, append([]string{"-n", ns[lc]}, pod...)...)
			require.NoError(t, err)
		}
	}
	for _, lc := range lcs {
		c.MustWait(ctx, t, ns[lc], "--for=condition=Ready", "pod", "--all", "--timeout=120s")
	}
	server := map[string]string{}
	for _, lc := range lcs {
		ip, err := c.Kubectl(ctx, "get", "pod", "server", "-n", ns[lc], "-o", "jsonpath={.status.podIP}")
		require.NoError(t, err)
		server[lc] = strings.TrimSpace(ip) + ":8080"
	}
	// connect asks from's client pod to open a connection to to's server.
	connect := func(from, to string) error {
		_, err := c.Kubectl(ctx, "exec", "-n", ns[from], "client", "--", "/agnhost", "connect", server[to], "--timeout=3s")
		return err
	}
	// Policies take effect when kube-router has synced them: poll for the
	// refusal, then require the allowed paths.
	refused := func(from, to string) {
		t.Helper()
		apitest.Eventually(t, from+" is refused by "+to, func() bool { return connect(from, to) != nil })
	}
	refused(a, b)
	refused(b, a)
	refused(sib, a)
	require.NoError(t, connect(a, a), "within a logical cloud")
	require.NoError(t, connect(b, b))
	// Cluster DNS is allowed out (dcm-egress): the name resolves and its
	// TCP port 53 answers.
	_, err := c.Kubectl(ctx, "exec", "-n", ns[a], "client", "--", "/agnhost", "connect", "kube-dns.kube-system.svc.cluster.local:53", "--timeout=3s")
	require.NoError(t, err, "the tenant's pod asks cluster DNS")

	// Tenants read DCM's policies but cannot change or delete them.
	got, err := tenant(a, "get", "networkpolicies", "-n", ns[a], "-o", "name")
	require.NoError(t, err)
	require.Contains(t, got, "networkpolicy.networking.k8s.io/dcm-ingress")
	_, err = tenant(a, "delete", "networkpolicy", "dcm-ingress", "-n", ns[a])
	require.Error(t, err, "the tenant cannot delete DCM's policy")

	// web opens ingress from its sibling jobs.
	var lc map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", a, "")), &lc))
	lc["spec"].(map[string]any)["allow-ingress-from"] = []string{"jobs"}
	body, err := json.Marshal(lc)
	require.NoError(t, err)
	r.Want(200, "PUT", a, string(body))
	r.Want(202, "POST", a+"/update", "")
	r.Settle(a, "Instantiated")
	apitest.Eventually(t, "the opened sibling connects", func() bool { return connect(sib, a) == nil })
	require.Error(t, connect(b, a), "the other project still does not")

	// Terminated, nothing of the tenant is left.
	r.Want(202, "POST", a+"/terminate", "")
	r.Settle(a, "Terminated")
	apitest.Eventually(t, "the namespace, its pods, policies and LimitRange go", func() bool {
		out, err := c.Kubectl(ctx, "get", "namespace", ns[a], "--ignore-not-found", "-o", "name")
		return err == nil && strings.TrimSpace(out) == ""
	})
	for _, kind := range []string{"pods", "networkpolicies", "limitranges"} {
		out, err := c.Kubectl(ctx, "get", kind, "-n", ns[a], "-o", "name")
		require.NoError(t, err)
		require.Empty(t, strings.TrimSpace(out), kind)
	}
}

// TestMeshNetworkPoliciesOnANode: the NetworkPolicies DCM renders around a
// logical cloud's istio namespace are enforced on a real node: istiod's CA
// port (15012) admits the logical cloud's own workload namespace and
// refuses a pod of any other namespace. An agnhost pod with istiod's
// labels stands in for istiod (its image is not on the node); the
// namespace's ResourceQuota, sized for istiod and its gateways, is raised
// by the cluster admin to make room for it and a client.
func TestMeshNetworkPoliciesOnANode(t *testing.T) {
	e := apitest.StartTenantsOn(t, kubetest.ForTestsWithNodes(t, 1), "np-mesh")
	c, r := e.H.Clusters[0], e.Admin
	lc := "/v2/projects/np-mesh/logical-clouds/mm"
	r.Want(201, "POST", "/v2/projects/np-mesh/logical-clouds", apitest.MeshBody("mm"))
	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1","loadbalancer-ip":"192.0.2.1"}`)
	r.Want(202, "POST", lc+"/apply", "")
	r.Settle(lc, "Instantiated")
	rev := apitest.MeshRevision(t, r, "np-mesh", "mm")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kubectl := func(args ...string) string { return c.MustKubectl(ctx, t, args...) }
	istioNS, workloadNS, outsider := "mm-istio-system", "mm-ns", "np-outsider"
	quota := kubectl("get", "resourcequota", "-n", istioNS, "-o", "jsonpath={.items[0].metadata.name}")
	kubectl("patch", "resourcequota", quota, "-n", istioNS, "--type=merge", "-p",
		`{"spec":{"hard":{"pods":"50","requests.cpu":"20","requests.memory":"20Gi","limits.cpu":"40","limits.memory":"40Gi"}}}`)
	kubectl("create", "namespace", outsider)
	dir := t.TempDir()
	pods := []struct{ ns, name, labels, args string }{
		{istioNS, "fake-istiod", fmt.Sprintf(`{"app":"istiod","istio.io/rev":%q}`, rev), `["netexec","--http-port=15012"]`},
		// Not injected: the injection webhook is istiod's, which does not run.
		{workloadNS, "client", `{"sidecar.istio.io/inject":"false"}`, `["pause"]`},
		{outsider, "client", `{}`, `["pause"]`},
	}
	for i, p := range pods {
		f := filepath.Join(dir, fmt.Sprintf("pod-%d.json", i))
		require.NoError(t, os.WriteFile(f, []byte(podJSON(p.ns, p.name, p.labels, p.args)), 0o600))
		kubectl("apply", "-f", f)
	}
	for _, p := range pods {
		c.MustWait(ctx, t, p.ns, "--for=condition=Ready", "pod/"+p.name, "--timeout=120s")
	}
	istiod := kubectl("get", "pod", "fake-istiod", "-n", istioNS, "-o", "jsonpath={.status.podIP}") + ":15012"
	connect := func(ns string) error {
		_, err := c.Kubectl(ctx, "exec", "-n", ns, "client", "--", "/agnhost", "connect", istiod, "--timeout=3s")
		return err
	}
	apitest.Eventually(t, "a pod of another namespace is refused at istiod's CA port", func() bool { return connect(outsider) != nil })
	require.NoError(t, connect(workloadNS), "the logical cloud's own workload namespace reaches it")
}

// podJSON is an agnhost pod that passes Pod Security's restricted level,
// with requests and limits of its own.
func podJSON(ns, name, labels, args string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":%q,"labels":%s},
	  "spec":{"securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}},
	    "containers":[{"name":"agnhost","image":%q,"imagePullPolicy":"Never","args":%s,
	      "securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}},
	      "resources":{"requests":{"cpu":"10m","memory":"32Mi"},"limits":{"cpu":"100m","memory":"64Mi"}}}]}}`,
		name, ns, labels, agnhost, args)
}

// TestTenantDeploymentRunsUnderQuota: through its own kubeconfig a tenant
// creates a Deployment of agnhost whose pods state no requests; on a real
// node its pods run with the LimitRange's defaults, and quota-usage shows
// what the running pods take.
func TestTenantDeploymentRunsUnderQuota(t *testing.T) {
	e := apitest.StartTenantsOn(t, kubetest.ForTestsWithNodes(t, 1), "wd")
	c, r := e.H.Clusters[0], e.Admin
	lc := "/v2/projects/wd/logical-clouds/lc"
	r.Want(201, "POST", "/v2/projects/wd/logical-clouds", `{
	  "metadata": {"name": "lc"},
	  "spec": {"namespace": "wd-ns", "user": {"user-name": "ann", "user-permissions": [
	    {"permission-name": "apps", "apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "create"]},
	    {"permission-name": "pods", "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
	  ]}}}`)
	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
	r.Want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"compute"},"spec":{"requests.cpu":"1","limits.memory":"1Gi","pods":4}}`)
	r.Want(202, "POST", lc+"/apply", "")
	r.Settle(lc, "Instantiated")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kc := filepath.Join(t.TempDir(), "ann.kubeconfig")
	require.NoError(t, os.WriteFile(kc, r.Kubeconfig(lc+"/cluster-references/cluster-1/kubeconfig"), 0o600))
	usage := func() map[string]string {
		var u apitest.QuotaUsage
		require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/quota-usage", "")), &u))
		require.Len(t, u.Clusters, 1)
		require.Len(t, u.Clusters[0].Quotas, 1)
		return u.Clusters[0].Quotas[0].Used
	}
	apitest.Eventually(t, "the cluster reports the quota", func() bool { return usage()["pods"] == "0" })

	_, err := c.KubectlAs(ctx, kc, "-n", "wd-ns", "create", "deployment", "web", "--image="+agnhost, "--replicas=2",
		"--", "/agnhost", "netexec", "--http-port=8080")
	require.NoError(t, err, "the tenant creates a Deployment")
	_, err = c.KubectlAs(ctx, kc, "-n", "wd-ns", "wait", "--for=condition=Ready", "pod", "-l", "app=web", "--timeout=2m")
	require.NoError(t, err, "its pods run on the node\n%s", c.Explain(ctx, "wd-ns"))
	out, err := c.KubectlAs(ctx, kc, "-n", "wd-ns", "get", "pods", "-l", "app=web",
		"-o", `jsonpath={range .items[*]}{.status.phase} {.spec.containers[0].resources.requests.cpu} {.spec.containers[0].resources.limits.memory}{"\n"}{end}`)
	require.NoError(t, err)
	require.Equal(t, "Running 100m 256Mi\nRunning 100m 256Mi", strings.TrimSpace(out), "the installation's container defaults")
	apitest.Eventually(t, "quota-usage shows the two running pods", func() bool {
		u := usage()
		return u["pods"] == "2" && u["requests.cpu"] == "200m" && u["limits.memory"] == "512Mi"
	})
}
