package allinone_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
)

// TestMeshIstiodRunsOnANode: a mesh logical cloud applied through the
// stack to a cluster with a node gets its istiod running as a pod from
// the image make images builds of the pinned Istio (loaded into the node,
// never pulled): its Deployment becomes Available (the readiness probe
// passes) and istiod, signing with DCM's cacerts, writes the
// istio-ca-root-cert ConfigMap in the logical cloud's workload namespace
// holding DCM's root for that logical cloud, the root the cadist URL
// serves.
func TestMeshIstiodRunsOnANode(t *testing.T) {
	h := kubetest.ForTestsWithNodes(t, 1)
	c := h.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	images, err := kubetest.IstioImages(root)
	require.NoError(t, err)
	require.NoError(t, c.LoadImages(ctx, images...))

	e := startTenantsOn(t, h, "ip-mesh")
	r := e.admin
	lc := "/v2/projects/ip-mesh/logical-clouds/im"
	r.want(201, "POST", "/v2/projects/ip-mesh/logical-clouds", meshBody("im"))
	r.want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+c.Name+`","loadbalancer-ip":"192.0.2.1"}`)
	r.want(202, "POST", lc+"/apply", "")
	r.settle(lc, "Instantiated")
	rev := meshRevision(t, r, "ip-mesh", "im")
	istioNS, workloadNS := "im-istio-system", "im-ns"

	deploy := "deployment/istiod-" + rev
	if _, err := c.Kubectl(ctx, "wait", "--for=condition=Available", deploy, "-n", istioNS, "--timeout=180s"); err != nil {
		// What the pod shows, for the next one to read.
		for _, args := range [][]string{
			{"get", "deployment,replicaset,pods,events", "-n", istioNS, "-o", "wide"},
			{"describe", "pods", "-n", istioNS},
			{"logs", deploy, "-n", istioNS, "--tail=60"},
		} {
			out, _ := c.Kubectl(ctx, args...)
			t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
		}
		t.Fatalf("istiod does not become Available: %v", err)
	}

	var bundle struct {
		RootCert string `json:"root-cert"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.want(200, "GET", "/v1/cadist/projects/ip-mesh/logicalclouds/im/clusters/"+c.Name, "")), &bundle))
	require.NotEmpty(t, bundle.RootCert)
	var written string
	eventually(t, "istiod writes istio-ca-root-cert in the workload namespace", func() bool {
		written, err = c.Kubectl(ctx, "get", "configmap", "istio-ca-root-cert", "-n", workloadNS, "-o", `jsonpath={.data.root-cert\.pem}`)
		return err == nil && written != ""
	})
	require.Equal(t, strings.TrimSpace(bundle.RootCert), strings.TrimSpace(written), "istiod's root is DCM's root of the logical cloud")
	logs, err := c.Kubectl(ctx, "logs", deploy, "-n", istioNS)
	require.NoError(t, err)
	require.Contains(t, logs, "Using istiod file format for signing ca files", "istiod signs with the cacerts Secret")
}
