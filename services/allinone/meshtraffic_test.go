package allinone_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
)

// grpcEcho is the tests' proxyless gRPC workload (test/grpcecho), built
// and loaded into every test node by make images.
const grpcEcho = "dcm.local/grpcecho:latest"

// istioNode is the shared cluster with a node, Istio's images (make
// images) loaded into it, and a context that ends after d.
func istioNode(t *testing.T, d time.Duration) (*kubetest.Harness, *kubetest.Cluster, context.Context) {
	t.Helper()
	h := kubetest.ForTestsWithNodes(t, 1)
	c := h.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	images, err := kubetest.IstioImages(root)
	require.NoError(t, err)
	require.NoError(t, c.LoadImages(ctx, images...))
	return h, c, ctx
}

// meshNode is a mesh logical cloud applied through the stack on the
// shared cluster with a node, its istiod Available.
type meshNode struct {
	t                   *testing.T
	c                   *kubetest.Cluster
	r                   *rest
	project, lc         string
	path                string
	istioNS, workloadNS string
	trustDomain         string
}

// startMeshOnNode applies a mesh logical cloud lc of project (a project of
// e) to c and waits for its istiod to be Available. The node is shared
// with the tests after this one: the logical cloud is terminated at
// cleanup as a tenant's would be, and its istiod and pods go with its
// namespaces (left running, they held the node's CPU and memory, and a
// later test's pods stayed Pending).
func startMeshOnNode(ctx context.Context, t *testing.T, e *tenants, c *kubetest.Cluster, project, lc, lbIP string) *meshNode {
	t.Helper()
	r := e.admin
	m := &meshNode{t: t, c: c, r: r, project: project, lc: lc,
		path:    "/v2/projects/" + project + "/logical-clouds/" + lc,
		istioNS: lc + "-istio-system", workloadNS: lc + "-ns", trustDomain: lc + "." + project + ".dcm.local"}
	r.want(201, "POST", "/v2/projects/"+project+"/logical-clouds", meshBody(lc))
	r.want(201, "POST", m.path+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+c.Name+`","loadbalancer-ip":"`+lbIP+`"}`)
	r.want(202, "POST", m.path+"/apply", "")
	r.settle(m.path, "Instantiated")
	t.Cleanup(func() {
		r.want(202, "POST", m.path+"/terminate", "")
		r.settle(m.path, "Terminated")
	})
	deploy := "deployment/istiod-" + meshRevision(t, r, project, lc)
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Available", deploy, "-n", m.istioNS, "--timeout=180s"); err != nil {
		m.show(ctx, []string{"get", "deployment,replicaset,pods,events", "-n", m.istioNS, "-o", "wide"},
			[]string{"logs", deploy, "-n", m.istioNS, "--tail=60"})
		t.Fatalf("istiod of %s does not become Available: %v", lc, err)
	}
	return m
}

// show logs what kubectl shows, for the next one to read.
func (m *meshNode) show(ctx context.Context, cmds ...[]string) {
	for _, args := range cmds {
		out, err := m.c.Kubectl(ctx, args...)
		m.t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// spiffe is the SPIFFE ID of a ServiceAccount of the workload namespace.
func (m *meshNode) spiffe(sa string) string {
	return "spiffe://" + m.trustDomain + "/ns/" + m.workloadNS + "/sa/" + sa
}

// echoPod runs grpcecho with args in the workload namespace as
// ServiceAccount sa (created here), labelled app: name, injected with
// Istio's grpc-agent template (pilot-agent beside it, no Envoy), with
// the security context Pod Security's restricted level asks for and small
// requests (the node is shared), and waits until it is Ready. The
// injector puts the application before the agent whatever the order
// here, so grpcecho serve waits for the xDS bootstrap the agent writes.
func (m *meshNode) echoPod(ctx context.Context, name, sa string, port int, args ...string) {
	m.t.Helper()
	if _, err := m.c.Kubectl(ctx, "get", "serviceaccount", sa, "-n", m.workloadNS); err != nil {
		m.c.MustKubectl(ctx, m.t, "create", "serviceaccount", sa, "-n", m.workloadNS)
	}
	ports := "[]"
	if port != 0 {
		ports = fmt.Sprintf(`[{"name":"grpc","containerPort":%d,"protocol":"TCP"}]`, port)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	f := filepath.Join(m.t.TempDir(), name+".json")
	require.NoError(m.t, os.WriteFile(f, []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod",
	  "metadata":{"name":%q,"namespace":%q,"labels":{"app":%q},"annotations":{"inject.istio.io/templates":"grpc-agent"}},
	  "spec":{"serviceAccountName":%q,"terminationGracePeriodSeconds":2,
	    "securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}},
	    "containers":[
	      {"name":"istio-proxy","image":"auto","imagePullPolicy":"IfNotPresent",
	       "securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]},"runAsUser":1337,"runAsGroup":1337}},
	      {"name":"app","image":%q,"imagePullPolicy":"Never","args":[%s],"ports":%s,
	       "securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}},
	       "resources":{"requests":{"cpu":"10m","memory":"32Mi"},"limits":{"cpu":"200m","memory":"64Mi"}}}]}}`,
		name, m.workloadNS, name, sa, grpcEcho, strings.Join(quoted, ","), ports)), 0o600))
	m.c.MustKubectl(ctx, m.t, "apply", "-f", f)
	if _, err := m.c.Kubectl(ctx, "wait", "--for=condition=Ready", "pod/"+name, "-n", m.workloadNS, "--timeout=120s"); err != nil {
		m.show(ctx, []string{"describe", "pod", name, "-n", m.workloadNS},
			[]string{"logs", name, "-c", "istio-proxy", "-n", m.workloadNS, "--tail=60"},
			[]string{"logs", name, "-c", "app", "-n", m.workloadNS, "--tail=60"})
		m.t.Fatalf("pod %s is not Ready: %v", name, err)
	}
}

// call runs `grpcecho call` in pod from, and returns its one line of
// output: "OK server=<id> client=<id> echo=hello" or "FAIL code=<code>
// message=...".
func (m *meshNode) call(ctx context.Context, from string, flags ...string) string {
	m.t.Helper()
	args := append([]string{"exec", from, "-c", "app", "-n", m.workloadNS, "--", "/usr/local/bin/grpcecho", "call", "-timeout", "5s"}, flags...)
	out, err := m.c.Kubectl(ctx, args...)
	out = strings.TrimSpace(out)
	if err != nil && !strings.HasPrefix(out, "FAIL ") {
		m.t.Fatalf("grpcecho call in %s did not run: %v (%s)", from, err, out)
	}
	return out
}

// callUntil calls from pod from until the answer starts with one of
// wants, and fails with the last answer after two minutes (istiod pushes
// the intent's objects to the workloads asynchronously).
func (m *meshNode) callUntil(ctx context.Context, wants []string, from string, flags ...string) string {
	m.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := m.call(ctx, from, flags...)
		for _, w := range wants {
			if strings.HasPrefix(got, w) {
				return got
			}
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("grpcecho call %s from %s: want one of %q, last answer %q", strings.Join(flags, " "), from, wants, got)
		}
		time.Sleep(time.Second)
	}
}

// TestMeshTrafficMutualTLSAndPolicy: proxyless gRPC workloads (the
// project's grpcecho, injected with Istio's grpc-agent template) in a mesh
// logical cloud on a cluster with a node, configured by nothing but the
// istiod DCM runs and an intracluster traffic intent applied through the
// REST API. The intent names client-a as echo's client with mutual TLS:
// client-a's calls succeed over mutual TLS, each side seeing the other's
// SPIFFE ID in DCM's trust domain; client-b (another ServiceAccount) is
// refused PERMISSION_DENIED by the AuthorizationPolicy DCM rendered; a
// plaintext call (client-a without xDS credentials, through xDS and
// straight to the pod's address) is refused under the STRICT
// PeerAuthentication DCM rendered. Without the mesh (no intent applied,
// or istiod not configuring the workloads) the plaintext and client-b
// calls would succeed, and the test fails.
//
// It fails today at its third step (client-b's calls succeed over mutual
// TLS, docs/mesh.md "What is proven and what is not"), so make test does
// not run it until that is mended: DCM_TEST_MESH_TRAFFIC=1 does.
func TestMeshTrafficMutualTLSAndPolicy(t *testing.T) {
	if os.Getenv("DCM_TEST_MESH_TRAFFIC") == "" {
		t.Skip("fails today: the AuthorizationPolicy DCM renders does not refuse another ServiceAccount at a proxyless server (issue 35, docs/mesh.md); DCM_TEST_MESH_TRAFFIC=1 runs it")
	}
	h, c, ctx := istioNode(t, 12*time.Minute)
	e := startTenantsOn(t, h, "mt-proj")
	m := startMeshOnNode(ctx, t, e, c, "mt-proj", "mt", "192.0.2.31")
	r := m.r

	// The server: echo behind the Service echo (port = target port 8080,
	// the port the AuthorizationPolicy names), as ServiceAccount echo.
	m.echoPod(ctx, "echo", "echo", 8080, "serve", "-port", "8080")
	m.c.MustKubectl(ctx, t, "create", "service", "clusterip", "echo", "--tcp=8080:8080", "-n", m.workloadNS)
	m.echoPod(ctx, "client-a", "client-a", 0, "idle")
	m.echoPod(ctx, "client-b", "client-b", 0, "idle")
	target := "xds:///echo." + m.workloadNS + ".svc.cluster.local:8080"
	podIP := strings.TrimSpace(m.c.MustKubectl(ctx, t, "get", "pod", "echo", "-n", m.workloadNS, "-o", "jsonpath={.status.podIP}"))
	require.NotEmpty(t, podIP)

	// Before any intent: what the mesh alone does to a proxyless server
	// (docs/mesh.md, "What is proven and what is not").
	before := m.callUntil(ctx, []string{"OK ", "FAIL code=PermissionDenied"}, "client-b", target)
	t.Logf("before the intent, client-b -> echo: %s", before)

	base := "/v2/projects/mt-proj/rb/echo/v1/"
	group := base + "traffic-intent-groups/echo"
	r.want(201, "POST", base+"traffic-intent-groups", `{"name": "echo", "description": "client-a calls echo", "logical-cloud": "mt"}`)
	r.want(201, "POST", group+"/intraclusterservice", `{"description": "client-a calls echo over mutual TLS",
		"connectivityResource": [{"echo": {"name": "echo", "mutualTLS": "true", "port": "8080", "protocol": "GRPC",
			"clientServices": [{"clientServiceName": "client-a", "protocol": "GRPC"}]}}]}`)
	r.want(202, "POST", group+"/apply", "")
	r.settleTraffic(group, "Applied")
	t.Cleanup(func() {
		r.want(202, "POST", group+"/terminate", "")
		r.settleTraffic(group, "Terminated")
	})
	// On failure, what istiod was given and what it said, for the next
	// one to read (registered after the terminate: runs before it).
	t.Cleanup(func() {
		if t.Failed() {
			m.show(context.Background(), []string{"get", "authorizationpolicies,peerauthentications,destinationrules", "-n", m.workloadNS, "-o", "yaml"},
				[]string{"logs", "deployment/istiod-" + meshRevision(t, r, "mt-proj", "mt"), "-n", m.istioNS, "--tail=80"},
				[]string{"logs", "echo", "-c", "app", "-n", m.workloadNS, "--tail=40"})
		}
	})

	// The named client: mutual TLS both ways, identities in DCM's trust
	// domain.
	got := m.callUntil(ctx, []string{"OK "}, "client-a", target)
	require.Equal(t, "OK server="+m.spiffe("echo")+" client="+m.spiffe("client-a")+" echo=hello", got,
		"client-a sees echo's SPIFFE ID, echo sees client-a's")
	// Another ServiceAccount: mutual TLS (its certificate is good) but no
	// ALLOW rule names it.
	got = m.callUntil(ctx, []string{"FAIL code=PermissionDenied"}, "client-b", target)
	t.Logf("client-b -> echo: %s", got)
	// Plaintext, under STRICT: refused at the handshake, through xDS and
	// straight to the pod.
	got = m.callUntil(ctx, []string{"FAIL code=Unavailable"}, "client-a", "-plaintext", target)
	t.Logf("client-a plaintext -> echo: %s", got)
	got = m.callUntil(ctx, []string{"FAIL code=Unavailable"}, "client-a", "-plaintext", "passthrough:///"+podIP+":8080")
	t.Logf("client-a plaintext -> %s:8080: %s", podIP, got)
	// And the named client still passes (the refusals are not the server
	// gone).
	require.True(t, strings.HasPrefix(m.call(ctx, "client-a", target), "OK "), "client-a after the refusals")
	logs := m.c.MustKubectl(ctx, t, "logs", "echo", "-c", "app", "-n", m.workloadNS)
	require.Contains(t, logs, "call from "+m.spiffe("client-a"), "the server saw client-a's identity")
}
