package deploytest

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/deploy/test/certs"
	"github.com/dcm-project/dcm/platform/kubetest"
)

// TestDevOverlayRunsAndDrivesACluster deploys DCM by its own manifests on
// a cluster with a real node, as docs/deploy.md says to by hand: cluster
// DNS (kube-dns), cert-manager's CRDs, the Namespace and the admin token's
// Secret, `kubectl apply -k deploy/overlays/dev`; the Certificates'
// Secrets (package certs: cert-manager's controller is not run);
// every Deployment Available, its readiness probe passing, under the
// restricted Pod Security Standard and the NetworkPolicies kube-router
// enforces. Then the REST API, reached through the gateway's Service from
// the node's network namespace as a pod would, registers cluster-2 and
// applies a logical cloud there until Instantiated, and the tenant's
// kubeconfig works against cluster-2.
func TestDevOverlayRunsAndDrivesACluster(t *testing.T) {
	h := kubetest.ForTestsWithNodes(t, 2) // skips under -short
	c1, c2 := h.Clusters[0], h.Clusters[1]
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	kubectl := func(args ...string) string { return c1.MustKubectl(ctx, t, args...) }

	prepareCluster(t, ctx, c1)
	// docs/deploy.md, "Dev".
	token := adminToken(t, ctx, c1)
	deployOverlay(t, ctx, c1, "dev")

	// The overlay's NetworkPolicies, enforced by kube-router: a pod that
	// the policies take for the gateway reaches core's gRPC port (only the
	// gateway calls core: the services it renders with are told their
	// facts); one they take for the user service reaches neither core's
	// nor rsync's gRPC port (only gateway, core and traffic call rsync),
	// and rsync's HTTPS port, open to all.
	podIP := func(program string) string {
		return kubectl("-n", "dcm", "get", "pods", "-l", "app.kubernetes.io/name=dcm-"+program, "-o", "jsonpath={.items[0].status.podIP}")
	}
	for _, as := range []string{"gateway", "user"} {
		kubectl("-n", "dcm", "run", "as-"+as, "--image="+agnhost(t), "--image-pull-policy=IfNotPresent",
			"--labels=app.kubernetes.io/name=dcm-"+as, "--restart=Never", "--override-type=strategic", "--overrides="+restrictedOverrides("as-"+as), "--command", "--", "/agnhost", "pause")
	}
	c1.MustWait(ctx, t, "dcm", "--for=condition=Ready", "pod/as-gateway", "pod/as-user", "--timeout=2m")
	connect := func(from, to string) error {
		_, err := c1.Kubectl(ctx, "-n", "dcm", "exec", "as-"+from, "--", "/agnhost", "connect", to, "--timeout=5s")
		return err
	}
	require.NoError(t, connect("gateway", podIP("core")+":9090"), "gateway -> core gRPC is allowed")
	require.Error(t, connect("user", podIP("core")+":9090"), "user -> core gRPC is not allowed: the NetworkPolicy dcm-core is enforced")
	require.Error(t, connect("user", podIP("rsync")+":9090"), "user -> rsync gRPC is not allowed: the NetworkPolicy dcm-rsync is enforced")
	require.NoError(t, connect("user", podIP("rsync")+":8080"), "rsync's HTTPS port is open to all")
	kubectl("-n", "dcm", "delete", "pod", "as-gateway", "as-user", "--wait=false")

	api := gatewayClient(t, ctx, c1, token)
	status, body := api.do("GET", "/v2/projects", "")
	require.Equal(t, 200, status, "%s", body)
	registerCluster(t, api, c2)
	api.want(201, "POST", "/v2/projects", `{"metadata":{"name":"proj1"}}`)
	lc := "/v2/projects/proj1/logical-clouds/lc-1"
	api.want(201, "POST", "/v2/projects/proj1/logical-clouds", tenantCloud("lc-1", "deploy-ns-1"))
	api.want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"local","cluster-name":"`+c2.Name+`"}`)
	api.want(202, "POST", lc+"/apply", "")
	api.settle(lc, 3*time.Minute)
	tenantWorks(t, ctx, api, c2, lc, "deploy-ns-1")
}

// prepareCluster gives c what DCM's overlays need of it: kube-dns, and
// cert-manager's CRDs, established.
func prepareCluster(t *testing.T, ctx context.Context, c *kubetest.Cluster) {
	t.Helper()
	require.NoError(t, c.StartDNS(ctx), "kube-dns on %s", c.Name)
	for _, f := range certManagerCRDs(t) {
		// Server-side: the CRDs are too big for the last-applied annotation.
		c.MustKubectl(ctx, t, "apply", "--server-side", "-f", f)
	}
	for _, crd := range []string{"issuers.cert-manager.io", "certificates.cert-manager.io"} {
		// kubectl wait fails at once while the CRD has no conditions yet.
		var err error
		for deadline := time.Now().Add(time.Minute); ; {
			if _, err = c.Kubectl(ctx, "wait", "--for=condition=Established", "crd/"+crd, "--timeout=10s"); err == nil || time.Now().After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
		require.NoError(t, err, "CRD %s Established", crd)
	}
}

// adminToken creates the Namespace dcm and the admin token's Secret
// (docs/deploy.md, "Dev") and returns the token. When the test ends it
// deletes the Namespace, DCM with it, and waits until it is gone: the
// package's tests share the clusters, and the next one deploys DCM there
// again.
func adminToken(t *testing.T, ctx context.Context, c *kubetest.Cluster) string {
	t.Helper()
	c.MustKubectl(ctx, t, "create", "namespace", "dcm")
	t.Cleanup(func() {
		// The test's own context is done by now.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if _, err := c.Kubectl(ctx, "delete", "namespace", "dcm", "--wait", "--timeout=5m"); err != nil {
			t.Errorf("removing DCM from %s: %v", c.Name, err)
		}
	})
	secret := make([]byte, 32)
	_, err := rand.Read(secret)
	require.NoError(t, err)
	token := "dcm_admin_" + hex.EncodeToString(secret)
	c.MustKubectl(ctx, t, "-n", "dcm", "create", "secret", "generic", "dcm-admin-token", "--from-literal=token="+token)
	return token
}

// deployOverlay runs `kubectl apply -k deploy/overlays/<overlay>`, writes
// the Certificates' Secrets (package certs: cert-manager's controller is
// not run) and waits until every Deployment is Available with the
// overlay's replicas Ready (their readiness probes passing) and no
// container restarted (their liveness probes passing).
func deployOverlay(t *testing.T, ctx context.Context, c *kubetest.Cluster, overlay string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(repo, "deploy", "overlays", overlay))
	require.NoError(t, err)
	c.MustKubectl(ctx, t, "apply", "-k", dir)
	secrets, err := certs.Issue(ctx, c.Kubectl, "dcm")
	require.NoError(t, err)
	require.Len(t, secrets, len(programs(t))+2, "the CA, a certificate per program and the gateway's HTTPS one")

	start := time.Now()
	if _, err := c.Kubectl(ctx, "-n", "dcm", "wait", "--for=condition=Available", "deployment", "--all", "--timeout=5m"); err != nil {
		dumpPods(t, ctx, c, "dcm")
		t.Fatalf("the %s overlay's Deployments: %v", overlay, err)
	}
	t.Logf("every Deployment Available %s after the Secrets", time.Since(start).Round(time.Second))
	var deps struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct{ Replicas, ReadyReplicas, AvailableReplicas int32 }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(c.MustKubectl(ctx, t, "-n", "dcm", "get", "deployments", "-o", "json")), &deps))
	require.Len(t, deps.Items, len(programs(t)), "a Deployment per program")
	for _, d := range deps.Items {
		want := overlays[overlay](strings.TrimPrefix(d.Metadata.Name, "dcm-"))
		require.Equal(t, want, d.Status.ReadyReplicas, "%s: its pods pass their readiness probe", d.Metadata.Name)
	}
	requireNoRestarts(t, ctx, c)
}

// requireNoRestarts fails if a container of a DCM pod has restarted (its
// liveness probe failed, or it exited).
func requireNoRestarts(t *testing.T, ctx context.Context, c *kubetest.Cluster) {
	t.Helper()
	for name, restarts := range dcmPods(t, ctx, c) {
		require.Zero(t, restarts, "%s: its liveness probe passes, it never exited", name)
	}
}

// dcmPods are the pods of the namespace dcm, with their containers'
// restarts.
func dcmPods(t *testing.T, ctx context.Context, c *kubetest.Cluster) map[string]int {
	t.Helper()
	var pods struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct {
				ContainerStatuses []struct{ RestartCount int }
			}
		}
	}
	require.NoError(t, json.Unmarshal([]byte(c.MustKubectl(ctx, t, "-n", "dcm", "get", "pods", "-o", "json")), &pods))
	out := map[string]int{}
	for _, p := range pods.Items {
		out[p.Metadata.Name] = 0
		for _, cs := range p.Status.ContainerStatuses {
			out[p.Metadata.Name] += cs.RestartCount
		}
	}
	return out
}

// gatewayClient reaches the REST API through the gateway's Service, from
// c's node's network namespace (kube-proxy's rules there), over HTTPS
// verified against the CA the overlay made in the cluster.
func gatewayClient(t *testing.T, ctx context.Context, c *kubetest.Cluster, token string) *restClient {
	t.Helper()
	gatewayIP := strings.TrimSpace(c.MustKubectl(ctx, t, "-n", "dcm", "get", "service", "dcm-gateway", "-o", "jsonpath={.spec.clusterIP}"))
	caPEM, err := base64.StdEncoding.DecodeString(c.MustKubectl(ctx, t, "-n", "dcm", "get", "secret", "dcm-ca", "-o", "jsonpath={.data.ca\\.crt}"))
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, caPEM, 0o600))
	return &restClient{t: t, ctx: ctx, netns: nodeNetns(t, c), ca: caFile, ip: gatewayIP, token: token}
}

// registerCluster registers c under the provider local with its
// kubeconfig: its API server's address on the host's bridge, which
// rsync's pods reach (egress is open).
func registerCluster(t *testing.T, api *restClient, c *kubetest.Cluster) {
	t.Helper()
	api.want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"local"}}`)
	reg, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": c.Name}, "spec": map[string]any{"kubeconfig": string(c.Kubeconfig)}})
	require.NoError(t, err)
	body := api.want(201, "POST", "/v2/cluster-providers/local/clusters", string(reg))
	require.Contains(t, body, c.Server, "the registry read %s's server from its kubeconfig", c.Name)
}

// tenantCloud is a logical cloud in namespace ns with a user allowed to
// get, list and create ConfigMaps there.
func tenantCloud(name, ns string) string {
	return `{"metadata":{"name":"` + name + `"},"spec":{"namespace":"` + ns + `","user":{"user-name":"user-1","user-permissions":[
	  {"permission-name":"configmaps","apiGroups":[""],"resources":["configmaps"],"verbs":["get","list","create"]}]}}}`
}

// tenantWorks reads logical cloud lc's kubeconfig for cluster c and uses
// it there: the tenant may create ConfigMaps (and does, in namespace ns)
// but not Secrets.
func tenantWorks(t *testing.T, ctx context.Context, api *restClient, c *kubetest.Cluster, lc, ns string) {
	t.Helper()
	kc := api.want(200, "GET", lc+"/cluster-references/"+c.Name+"/kubeconfig", "")
	require.Contains(t, kc, "server: "+c.Server)
	kcFile := filepath.Join(t.TempDir(), "tenant.kubeconfig")
	require.NoError(t, os.WriteFile(kcFile, []byte(kc), 0o600))
	out, err := c.KubectlAs(ctx, kcFile, "auth", "can-i", "create", "configmaps")
	require.NoError(t, err)
	require.Equal(t, "yes", strings.TrimSpace(out), "%s's tenant", lc)
	out, _ = c.KubectlAs(ctx, kcFile, "auth", "can-i", "create", "secrets")
	require.Equal(t, "no", strings.TrimSpace(out), "the tenant has the permissions it was given, no more")
	_, err = c.KubectlAs(ctx, kcFile, "create", "configmap", "from-the-tenant", "--from-literal=k=v")
	require.NoError(t, err)
	out, err = c.Kubectl(ctx, "-n", ns, "get", "configmap", "from-the-tenant", "-o", "jsonpath={.data.k}")
	require.NoError(t, err)
	require.Equal(t, "v", out, "the tenant's ConfigMap is in its namespace on %s", c.Name)
}

// restrictedOverrides makes kubectl run's pod (its container is named
// after the pod) meet the restricted Pod Security Standard the namespace
// dcm enforces.
func restrictedOverrides(pod string) string {
	return fmt.Sprintf(`{"spec":{"securityContext":{"runAsNonRoot":true,"runAsUser":65532,"seccompProfile":{"type":"RuntimeDefault"}},
  "containers":[{"name":%q,"securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}]}}`, pod)
}

// agnhost is the name of the agnhost image of make images
// (registry.k8s.io/e2e-test-images/agnhost:<its VERSION>), read from the
// index.json of bin/images/agnhost.tar.
func agnhost(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repo, "bin", "images", "agnhost.tar"))
	require.NoError(t, err, "make images")
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		require.NoError(t, err, "agnhost.tar has an index.json")
		if h.Name != "index.json" {
			continue
		}
		var index struct {
			Manifests []struct{ Annotations map[string]string }
		}
		require.NoError(t, json.NewDecoder(tr).Decode(&index))
		for _, m := range index.Manifests {
			if name := m.Annotations["io.containerd.image.name"]; strings.HasPrefix(name, agnhostRef) {
				return name
			}
		}
		t.Fatalf("agnhost.tar names no %s<tag>", agnhostRef)
	}
}

// restClient calls the gateway's Service with curl inside a network
// namespace: HTTPS verified against the dev CA under the Service's DNS
// name (the gateway's certificate's), the admin token as bearer.
type restClient struct {
	t                    *testing.T
	ctx                  context.Context
	netns, ca, ip, token string
}

// want calls the API and requires the answer's status.
func (r *restClient) want(code int, method, path, body string) string {
	r.t.Helper()
	status, out := r.do(method, path, body)
	require.Equal(r.t, code, status, "%s %s: %s", method, path, out)
	return out
}

// waitFor polls GET path until it answers code, for up to wait.
func (r *restClient) waitFor(code int, path string, wait time.Duration) {
	r.t.Helper()
	start := time.Now()
	for deadline := start.Add(wait); ; {
		status, body := r.do("GET", path, "")
		if status == code {
			r.t.Logf("GET %s answered %d after %s", path, code, time.Since(start).Round(100*time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("GET %s: %d, not %d, after %s: %s", path, status, code, wait, body)
		}
		select {
		case <-r.ctx.Done():
			r.t.Fatal(r.ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// lcStatus is the part of GET .../status the tests read.
type lcStatus struct {
	State      string   `json:"state"`
	Ready      int      `json:"ready"`
	Total      int      `json:"total"`
	Generation int64    `json:"generation,string"`
	LastErrors []string `json:"last-errors"`
	Clusters   []struct {
		Name      string `json:"cluster-name"`
		Resources []struct {
			Kind  string `json:"kind"`
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"resources"`
	} `json:"clusters"`
}

// settle polls logical cloud lc's status until it is Instantiated, for up
// to wait.
func (r *restClient) settle(lc string, wait time.Duration) lcStatus {
	r.t.Helper()
	var st lcStatus
	var body string
	for deadline := time.Now().Add(wait); ; {
		body = r.want(200, "GET", lc+"/status", "")
		st = lcStatus{}
		require.NoError(r.t, json.Unmarshal([]byte(body), &st), "%s", body)
		if st.State == "Instantiated" || time.Now().After(deadline) {
			break
		}
		select {
		case <-r.ctx.Done():
			r.t.Fatal(r.ctx.Err())
		case <-time.After(time.Second):
		}
	}
	require.Equal(r.t, "Instantiated", st.State, "%s: %s", lc, body)
	return st
}

func (r *restClient) do(method, path, body string) (int, string) {
	r.t.Helper()
	const host = "dcm-gateway.dcm.svc"
	args := []string{"netns", "exec", r.netns, "curl", "-sS", "--max-time", "30", "--cacert", r.ca,
		"--resolve", host + ":443:" + r.ip, "-H", "Authorization: Bearer " + r.token,
		"-X", method, "-w", "\n%{http_code}", "https://" + host + path}
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "-d", body)
	}
	out, err := exec.CommandContext(r.ctx, "ip", args...).CombinedOutput()
	require.NoError(r.t, err, "%s %s: %s", method, path, out)
	s := strings.TrimRight(string(out), "\n")
	i := strings.LastIndexByte(s, '\n')
	require.GreaterOrEqual(r.t, i, 0, "%s %s: %s", method, path, out)
	code, err := strconv.Atoi(s[i+1:])
	require.NoError(r.t, err, "%s %s: %s", method, path, out)
	return code, s[:i]
}

// nodeNetns is the network namespace of c's node: dcmk<slot>-<cluster>,
// the slot being the third octet... of the API server's host-bridge
// address 10.(200+slot).0.1 (platform/kubetest/node.go).
func nodeNetns(t *testing.T, c *kubetest.Cluster) string {
	t.Helper()
	u, err := url.Parse(c.Server)
	require.NoError(t, err)
	var a, b int
	_, err = fmt.Sscanf(u.Hostname(), "%d.%d.", &a, &b)
	require.NoError(t, err, "%s", c.Server)
	ns := fmt.Sprintf("dcmk%d-%s", b-200, c.Name)
	_, err = os.Stat(filepath.Join("/run/netns", ns))
	require.NoError(t, err, "the node's network namespace")
	return ns
}

// dumpPods logs what a failed rollout needs looked at: the pods, their
// events and the logs of those not ready.
func dumpPods(t *testing.T, ctx context.Context, c *kubetest.Cluster, ns string) {
	t.Helper()
	t.Logf("%s", c.Explain(ctx, ns))
	names, _ := c.Kubectl(ctx, "-n", ns, "get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}")
	for _, p := range strings.Fields(names) {
		out, _ := c.Kubectl(ctx, "-n", ns, "logs", p, "--tail=30")
		t.Logf("logs of %s:\n%s", p, out)
	}
}
