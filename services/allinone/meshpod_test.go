package allinone_test

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMeshIstiodRunsOnANode: a mesh logical cloud applied through the
// stack to a cluster with a node gets its istiod running as a pod from
// the image make images builds of the pinned Istio (loaded into the node,
// never pulled): its Deployment becomes Available (the readiness probe
// passes) and istiod, signing with DCM's cacerts, writes the
// istio-ca-root-cert ConfigMap in the logical cloud's workload namespace
// holding DCM's root for that logical cloud, the root the cadist URL
// serves. A pod of that namespace asking for the grpc-agent injection
// template is injected by that istiod with pilot-agent (the proxyv2 image
// make images builds, without Envoy), becomes Ready, and the certificate
// the agent writes for proxyless gRPC names the pod's ServiceAccount
// (spiffe://<trust domain>/ns/<ns>/sa/<sa>), signed by DCM's intermediate
// for the cluster and verifying to the cadist root.
func TestMeshIstiodRunsOnANode(t *testing.T) {
	h, c, ctx := istioNode(t, 8*time.Minute)
	e := startTenantsOn(t, h, "ip-mesh")
	m := startMeshOnNode(ctx, t, e, c, "ip-mesh", "im", "192.0.2.1")
	r := m.r
	deploy := "deployment/istiod-" + meshRevision(t, r, "ip-mesh", "im")
	istioNS, workloadNS := m.istioNS, m.workloadNS
	show := m.show

	var bundle struct {
		RootCert string `json:"root-cert"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.want(200, "GET", "/v1/cadist/projects/ip-mesh/logicalclouds/im/clusters/"+c.Name, "")), &bundle))
	require.NotEmpty(t, bundle.RootCert)
	var written string
	var err error
	eventually(t, "istiod writes istio-ca-root-cert in the workload namespace", func() bool {
		written, err = c.Kubectl(ctx, "get", "configmap", "istio-ca-root-cert", "-n", workloadNS, "-o", `jsonpath={.data.root-cert\.pem}`)
		return err == nil && written != ""
	})
	require.Equal(t, strings.TrimSpace(bundle.RootCert), strings.TrimSpace(written), "istiod's root is DCM's root of the logical cloud")
	logs, err := c.Kubectl(ctx, "logs", deploy, "-n", istioNS)
	require.NoError(t, err)
	require.Contains(t, logs, "Using istiod file format for signing ca files", "istiod signs with the cacerts Secret")

	// Injection with the proxyless template, answered by the running
	// istiod: the pod gets the agent, which gets a workload certificate.
	c.MustKubectl(ctx, t, "create", "serviceaccount", "app", "-n", workloadNS)
	f := filepath.Join(t.TempDir(), "app.json")
	require.NoError(t, os.WriteFile(f, []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod",
	  "metadata":{"name":"app","namespace":%q,"annotations":{"inject.istio.io/templates":"grpc-agent"}},
	  "spec":{"serviceAccountName":"app","securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}},
	    "containers":[
	      {"name":"app","image":%q,"imagePullPolicy":"Never","args":["pause"],
	       "securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}},
	       "resources":{"requests":{"cpu":"10m","memory":"32Mi"},"limits":{"cpu":"100m","memory":"64Mi"}}},
	      {"name":"istio-proxy","image":"auto","imagePullPolicy":"IfNotPresent",
	       "securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]},"runAsUser":1337,"runAsGroup":1337}}]}}`,
		workloadNS, agnhost)), 0o600))
	c.MustKubectl(ctx, t, "apply", "-f", f)
	image := c.MustKubectl(ctx, t, "get", "pod", "app", "-n", workloadNS, "-o", `jsonpath={.spec.containers[?(@.name=="istio-proxy")].image}`)
	require.Equal(t, "docker.io/istio/proxyv2:1.31.0", image, "the injector set the agent's image")
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Ready", "pod/app", "-n", workloadNS, "--timeout=120s"); err != nil {
		show(ctx, []string{"describe", "pod", "app", "-n", workloadNS}, []string{"logs", "app", "-c", "istio-proxy", "-n", workloadNS, "--tail=60"})
		t.Fatalf("the injected pod is not Ready: %v", err)
	}
	file := func(name string) []byte {
		out := c.MustKubectl(ctx, t, "exec", "app", "-c", "app", "-n", workloadNS, "--", "/agnhost", "mounttest", "--file_content=/var/lib/istio/data/"+name)
		_, content, ok := strings.Cut(out, ":")
		require.True(t, ok, out)
		return []byte(strings.TrimSpace(content))
	}
	var chain struct {
		CaCert string `json:"ca-cert"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.want(200, "GET", "/v1/cadist/projects/ip-mesh/logicalclouds/im/clusters/"+c.Name, "")), &chain))
	leafs := pemCerts(t, file("cert-chain.pem"))
	require.NotEmpty(t, leafs)
	leaf := leafs[0]
	require.Len(t, leaf.URIs, 1, "subject %s, issuer %s, CA %v, %d in the chain", leaf.Subject, leaf.Issuer, leaf.IsCA, len(leafs))
	require.Equal(t, "spiffe://im.ip-mesh.dcm.local/ns/"+workloadNS+"/sa/app", leaf.URIs[0].String())
	inter := pemCerts(t, []byte(chain.CaCert))[0]
	require.NoError(t, leaf.CheckSignatureFrom(inter), "the agent's certificate is signed by DCM's intermediate for the cluster")
	roots, inters := x509.NewCertPool(), x509.NewCertPool()
	for _, c := range pemCerts(t, []byte(bundle.RootCert)) {
		roots.AddCert(c)
	}
	inters.AddCert(inter)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inters, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	require.NoError(t, err, "and chains to the root the cadist URL serves")
}
