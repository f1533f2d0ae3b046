package nodes_test

import (
	"context"
	"crypto/x509"
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
	r                   *apitest.REST
	project, lc         string
	path                string
	istioNS, workloadNS string
	trustDomain         string
}

// beginMeshOnNode creates logical cloud lc of project (a project of e)
// from body, on c, and applies it, without waiting: ready waits. Two
// begun one after the other start together. The node is shared with the
// tests after this one: the logical cloud is terminated at cleanup as a
// tenant's would be, and its istiod and pods go with its namespaces (left
// running, they held the node's CPU and memory, and a later test's pods
// stayed Pending).
func beginMeshOnNode(t *testing.T, e *apitest.Tenants, c *kubetest.Cluster, project, lc, lbIP, body string) *meshNode {
	t.Helper()
	r := e.Admin
	m := &meshNode{t: t, c: c, r: r, project: project, lc: lc,
		path:    "/v2/projects/" + project + "/logical-clouds/" + lc,
		istioNS: lc + "-istio-system", workloadNS: lc + "-ns", trustDomain: lc + "." + project + ".dcm.local"}
	r.Want(201, "POST", "/v2/projects/"+project+"/logical-clouds", body)
	r.Want(201, "POST", m.path+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+c.Name+`","loadbalancer-ip":"`+lbIP+`"}`)
	r.Want(202, "POST", m.path+"/apply", "")
	t.Cleanup(func() {
		r.Want(202, "POST", m.path+"/terminate", "")
		r.Settle(m.path, "Terminated")
	})
	return m
}

// ready waits until m is Instantiated and its istiod Available.
func (m *meshNode) ready(ctx context.Context) {
	m.t.Helper()
	m.r.Settle(m.path, "Instantiated")
	deploy := "deployment/istiod-" + apitest.MeshRevision(m.t, m.r, m.project, m.lc)
	if _, err := m.c.Kubectl(ctx, "wait", "--for=condition=Available", deploy, "-n", m.istioNS, "--timeout=180s"); err != nil {
		m.show(ctx, []string{"get", "deployment,replicaset,pods,events", "-n", m.istioNS, "-o", "wide"},
			[]string{"logs", deploy, "-n", m.istioNS, "--tail=60"})
		m.t.Fatalf("istiod of %s does not become Available: %v", m.lc, err)
	}
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
// requests for both containers (the node is shared: without its own, the
// agent got the logical cloud's LimitRange default, 100m, and with two
// istiods on the node the fifth pod did not fit), and waits until it is
// Ready. The
// injector puts the application before the agent whatever the order
// here, so grpcecho serve waits for the xDS bootstrap the agent writes.
func (m *meshNode) startEchoPod(ctx context.Context, name, sa string, port int, args ...string) {
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
	       "securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]},"runAsUser":1337,"runAsGroup":1337},
	       "resources":{"requests":{"cpu":"10m","memory":"48Mi"},"limits":{"cpu":"300m","memory":"256Mi"}}},
	      {"name":"app","image":%q,"imagePullPolicy":"Never","args":[%s],"ports":%s,
	       "securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}},
	       "resources":{"requests":{"cpu":"10m","memory":"32Mi"},"limits":{"cpu":"200m","memory":"64Mi"}}}]}}`,
		name, m.workloadNS, name, sa, grpcEcho, strings.Join(quoted, ","), ports)), 0o600))
	m.c.MustKubectl(ctx, m.t, "apply", "-f", f)
}

// echoPod starts an echo pod (startEchoPod) and waits until it is Ready.
func (m *meshNode) echoPod(ctx context.Context, name, sa string, port int, args ...string) {
	m.t.Helper()
	m.startEchoPod(ctx, name, sa, port, args...)
	m.waitPods(ctx, name)
}

// waitPods waits until the pods of the workload namespace are Ready.
func (m *meshNode) waitPods(ctx context.Context, names ...string) {
	m.t.Helper()
	for _, name := range names {
		if _, err := m.c.Kubectl(ctx, "wait", "--for=condition=Ready", "pod/"+name, "-n", m.workloadNS, "--timeout=120s"); err != nil {
			m.show(ctx, []string{"describe", "pod", name, "-n", m.workloadNS},
				[]string{"logs", name, "-c", "istio-proxy", "-n", m.workloadNS, "--tail=60"},
				[]string{"logs", name, "-c", "app", "-n", m.workloadNS, "--tail=60"})
			m.t.Fatalf("pod %s is not Ready: %v", name, err)
		}
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

// checkIstiodAndAgent: m's istiod, running as a pod from the image make
// images builds of the pinned Istio (loaded into the node, never pulled),
// signs with DCM's cacerts and writes DCM's root for the logical cloud,
// the root the cadist URL serves, to istio-ca-root-cert in the workload
// namespace; it injected pod with the agent's image (proxyv2, without
// Envoy), and the certificate the agent wrote for proxyless gRPC names
// the pod's ServiceAccount, is signed by DCM's intermediate for the
// cluster and verifies to that root.
func (m *meshNode) checkIstiodAndAgent(ctx context.Context, pod string) {
	t := m.t
	t.Helper()
	b := m.r.Bundle(m.project, m.lc, m.c.Name)
	require.NotEmpty(t, b.RootCert)
	var written string
	apitest.Eventually(t, "istiod writes istio-ca-root-cert in the workload namespace", func() bool {
		out, err := m.c.Kubectl(ctx, "get", "configmap", "istio-ca-root-cert", "-n", m.workloadNS, "-o", `jsonpath={.data.root-cert\.pem}`)
		written = out
		return err == nil && out != ""
	})
	require.Equal(t, strings.TrimSpace(b.RootCert), strings.TrimSpace(written), "istiod's root is DCM's root of the logical cloud")
	logs := m.c.MustKubectl(ctx, t, "logs", "deployment/istiod-"+apitest.MeshRevision(t, m.r, m.project, m.lc), "-n", m.istioNS)
	require.Contains(t, logs, "Using istiod file format for signing ca files", "istiod signs with the cacerts Secret")
	image := m.c.MustKubectl(ctx, t, "get", "pod", pod, "-n", m.workloadNS, "-o", `jsonpath={.spec.containers[?(@.name=="istio-proxy")].image}`)
	require.Equal(t, "docker.io/istio/proxyv2:1.31.0", image, "the injector set the agent's image")
	leaf := m.certFile(ctx, pod, "cert-chain.pem")[0]
	sa := m.c.MustKubectl(ctx, t, "get", "pod", pod, "-n", m.workloadNS, "-o", "jsonpath={.spec.serviceAccountName}")
	require.Len(t, leaf.URIs, 1, "subject %s, issuer %s", leaf.Subject, leaf.Issuer)
	require.Equal(t, m.spiffe(sa), leaf.URIs[0].String())
	require.NoError(t, leaf.CheckSignatureFrom(apitest.PEMCerts(t, []byte(b.CaCert))[0]), "the agent's certificate is signed by DCM's intermediate for the cluster")
	_, err := leaf.Verify(x509.VerifyOptions{Roots: apitest.Pool(t, b.RootCert), Intermediates: apitest.Pool(t, b.CaCert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	require.NoError(t, err, "and chains to the root the cadist URL serves")
}

// certFile is a file of the agent's proxyless certificates in pod from
// (read with grpcecho cat: the image has no shell), parsed.
func (m *meshNode) certFile(ctx context.Context, pod, name string) []*x509.Certificate {
	m.t.Helper()
	out := m.c.MustKubectl(ctx, m.t, "exec", pod, "-c", "app", "-n", m.workloadNS, "--", "/usr/local/bin/grpcecho", "cat", "/var/lib/istio/data/"+name)
	return apitest.PEMCerts(m.t, []byte(out))
}

// TestMeshTrafficMutualTLSAndPolicy: proxyless gRPC workloads (the
// project's grpcecho, injected with Istio's grpc-agent template) in a mesh
// logical cloud on a cluster with a node, configured by nothing but the
// istiod DCM runs and an intracluster traffic intent applied through the
// REST API. Its istiod runs as a pod and signs the agents' certificates
// under DCM's intermediate (checkIstiodAndAgent). The intent names
// client-a as echo's client with mutual TLS:
//   - before any intent, the mesh's deny-all refuses every call
//     (PERMISSION_DENIED);
//   - client-a's calls succeed over mutual TLS, each side seeing the
//     other's SPIFFE ID in DCM's trust domain;
//   - client-b (another ServiceAccount) is refused PERMISSION_DENIED by the
//     AuthorizationPolicy DCM rendered;
//   - a plaintext call (client-a without xDS credentials, through xDS and
//     straight to the pod's address) is refused under the STRICT
//     PeerAuthentication DCM rendered;
//   - a second mesh logical cloud of the project on the same cluster,
//     which the first lets in by network policy (allow-ingress-from), cannot
//     call echo: not through its own istiod (which does not know echo), not
//     in plaintext, and not with its workload's own certificate presented
//     straight to echo's pod (mutual TLS completes, the policy refuses);
//   - after POST .../ca/rotate and .../update, istiod signs with the new
//     intermediate: a new workload's certificate chains through it to the
//     root, and calls keep working between old and new certificates.
//
// Without the mesh (no intent applied, or istiod not configuring the
// workloads) the plaintext, client-b and second logical cloud's calls
// would succeed, and the test fails.
func TestMeshTrafficMutualTLSAndPolicy(t *testing.T) {
	h, c, ctx := istioNode(t, 20*time.Minute)
	e := apitest.StartTenantsOn(t, h, "mt-proj")
	// The other logical cloud first (mt names it in allow-ingress-from);
	// both start together.
	other := beginMeshOnNode(t, e, c, "mt-proj", "mto", "192.0.2.32", apitest.MeshBody("mto"))
	m := beginMeshOnNode(t, e, c, "mt-proj", "mt", "192.0.2.31",
		`{"metadata": {"name": "mt"}, "spec": {"namespace": "mt-ns", "service-mesh": {"enabled": true}, "allow-ingress-from": ["mto"]}}`)
	m.ready(ctx)
	other.ready(ctx)
	r := m.r

	// The server: echo behind the Service echo (port = target port 8080,
	// the port the AuthorizationPolicy names), as ServiceAccount echo; the
	// clients, and the other logical cloud's, start with it.
	m.startEchoPod(ctx, "echo", "echo", 8080, "serve", "-port", "8080")
	m.c.MustKubectl(ctx, t, "create", "service", "clusterip", "echo", "--tcp=8080:8080", "-n", m.workloadNS)
	m.startEchoPod(ctx, "client-a", "client-a", 0, "idle")
	m.startEchoPod(ctx, "client-b", "client-b", 0, "idle")
	// The same ServiceAccount name as the allowed client, in the other
	// logical cloud's namespace and trust domain.
	other.startEchoPod(ctx, "intruder", "client-a", 0, "idle")
	m.waitPods(ctx, "echo", "client-a", "client-b")
	m.checkIstiodAndAgent(ctx, "client-a")
	target := "xds:///echo." + m.workloadNS + ".svc.cluster.local:8080"
	podIP := strings.TrimSpace(m.c.MustKubectl(ctx, t, "get", "pod", "echo", "-n", m.workloadNS, "-o", "jsonpath={.status.podIP}"))
	require.NotEmpty(t, podIP)
	direct := "passthrough:///" + podIP + ":8080"

	// Before any intent: the mesh's deny-all closes the namespace, for
	// proxyless servers too (kube.DenyAllPolicySpec).
	before := m.callUntil(ctx, []string{"FAIL code=PermissionDenied"}, "client-b", target)
	t.Logf("before the intent, client-b -> echo: %s", before)

	base := "/v2/projects/mt-proj/rb/echo/v1/"
	group := base + "traffic-intent-groups/echo"
	r.Want(201, "POST", base+"traffic-intent-groups", `{"name": "echo", "description": "client-a calls echo", "logical-cloud": "mt"}`)
	r.Want(201, "POST", group+"/intraclusterservice", `{"description": "client-a calls echo over mutual TLS",
		"connectivityResource": [{"echo": {"name": "echo", "mutualTLS": "true", "port": "8080", "protocol": "GRPC",
			"clientServices": [{"clientServiceName": "client-a", "protocol": "GRPC"}]}}]}`)
	r.Want(202, "POST", group+"/apply", "")
	r.SettleTraffic(group, "Applied")
	t.Cleanup(func() {
		r.Want(202, "POST", group+"/terminate", "")
		r.SettleTraffic(group, "Terminated")
	})
	// On failure, what istiod was given and what it said, for the next
	// one to read (registered after the terminate: runs before it).
	t.Cleanup(func() {
		if t.Failed() {
			m.show(context.Background(), []string{"get", "authorizationpolicies,peerauthentications,destinationrules,networkpolicies", "-n", m.workloadNS, "-o", "yaml"},
				[]string{"logs", "deployment/istiod-" + apitest.MeshRevision(t, r, "mt-proj", "mt"), "-n", m.istioNS, "--tail=80"},
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
	got = m.callUntil(ctx, []string{"FAIL code=Unavailable"}, "client-a", "-plaintext", direct)
	t.Logf("client-a plaintext -> %s:8080: %s", podIP, got)
	// And the named client still passes (the refusals are not the server
	// gone).
	require.True(t, strings.HasPrefix(m.call(ctx, "client-a", target), "OK "), "client-a after the refusals")
	logs := m.c.MustKubectl(ctx, t, "logs", "echo", "-c", "app", "-n", m.workloadNS)
	require.Contains(t, logs, "call from "+m.spiffe("client-a"), "the server saw client-a's identity")
	require.NotContains(t, logs, "call from "+m.spiffe("client-b"), "client-b's calls never reached the handler")

	t.Run("another logical cloud", func(t *testing.T) {
		outer := other.t
		other.t = t
		defer func() { other.t = outer }()
		other.waitPods(ctx, "intruder")
		// Its istiod does not watch mt-ns: no route to echo at all.
		got := other.call(ctx, "intruder", target)
		require.True(t, strings.HasPrefix(got, "FAIL "), "through its own istiod: %s", got)
		t.Logf("mto/intruder -> %s: %s", target, got)
		// Plaintext straight to the pod: mt-ns lets mto-ns in by network
		// policy, STRICT refuses it at the handshake.
		got = other.call(ctx, "intruder", "-plaintext", direct)
		require.True(t, strings.HasPrefix(got, "FAIL code=Unavailable"), "plaintext from mto: %s", got)
		// Its own workload certificate, straight to the pod: the
		// handshake completes (the project's logical clouds share its
		// root), the server sees mto's identity and echo's policy, which
		// names only client-a of mt-ns, refuses it.
		id := other.certFile(ctx, "intruder", "cert-chain.pem")[0].URIs[0].String()
		require.Equal(t, other.spiffe("client-a"), id, "the intruder's own identity, in mto's trust domain")
		got = other.callUntil(ctx, []string{"FAIL code=PermissionDenied"}, "intruder", "-certs", "/var/lib/istio/data", direct)
		t.Logf("mto/intruder with its certificate -> %s:8080: %s", podIP, got)
		logs := m.c.MustKubectl(ctx, t, "logs", "echo", "-c", "app", "-n", m.workloadNS)
		require.NotContains(t, logs, "call from "+id, "mto's calls never reached the handler")
	})

	t.Run("rotation", func(t *testing.T) {
		before := r.Bundle("mt-proj", "mt", c.Name)
		start := time.Now()
		r.Want(200, "POST", m.path+"/ca/rotate", `{}`)
		r.Want(202, "POST", m.path+"/update", "")
		r.Settle(m.path, "Instantiated")
		after := r.Bundle("mt-proj", "mt", c.Name)
		require.NotEqual(t, before.CaCert, after.CaCert, "a new intermediate")
		require.Equal(t, before.RootCert, after.RootCert, "under the same root")
		// The kubelet updates istiod's cacerts volume, istiod reloads it.
		deploy := "deployment/istiod-" + apitest.MeshRevision(t, r, "mt-proj", "mt")
		deadline := time.Now().Add(4 * time.Minute)
		for {
			out, _ := m.c.Kubectl(ctx, "logs", deploy, "-n", m.istioNS)
			if strings.Contains(out, "Istiod has detected the newly added intermediate CA") {
				t.Logf("rotate, update and istiod's reload of the kubelet's refreshed cacerts volume: %s", time.Since(start).Round(time.Second))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("istiod did not reload the rotated cacerts in 4 minutes")
			}
			time.Sleep(2 * time.Second)
		}
		// A workload started now gets its certificate from the new
		// intermediate.
		outer := m.t
		m.t = t
		defer func() { m.t = outer }()
		m.echoPod(ctx, "client-a2", "client-a", 0, "idle")
		chain := m.certFile(ctx, "client-a2", "cert-chain.pem")
		newInter := apitest.PEMCerts(t, []byte(after.CaCert))[0]
		require.NoError(t, chain[0].CheckSignatureFrom(newInter), "client-a2's certificate is signed by the new intermediate")
		_, err := chain[0].Verify(x509.VerifyOptions{Roots: apitest.Pool(t, after.RootCert), Intermediates: apitest.Pool(t, after.CaCert),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		require.NoError(t, err, "and chains to the root")
		oldChain := m.certFile(ctx, "client-a", "cert-chain.pem")
		require.NoError(t, oldChain[0].CheckSignatureFrom(apitest.PEMCerts(t, []byte(before.CaCert))[0]), "client-a still holds its first certificate")
		// Calls keep working: the new certificate to echo's old one, and
		// the old to the old.
		got := m.callUntil(ctx, []string{"OK "}, "client-a2", target)
		require.Equal(t, "OK server="+m.spiffe("echo")+" client="+m.spiffe("client-a")+" echo=hello", got)
		require.True(t, strings.HasPrefix(m.call(ctx, "client-a", target), "OK "), "client-a after the rotation")
		require.True(t, strings.HasPrefix(m.call(ctx, "client-b", target), "FAIL code=PermissionDenied"), "client-b after the rotation")
	})
}
