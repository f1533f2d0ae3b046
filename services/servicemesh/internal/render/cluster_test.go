package render_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/kubetest/istiotest"
	"github.com/dcm-project/dcm/services/servicemesh/internal/render"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// apply server-side applies one manifest, strictly validated (dryRun:
// the API server checks and admits it, nothing is stored).
func apply(ctx context.Context, t *testing.T, c *kubetest.Cluster, manifest string, dryRun bool) {
	t.Helper()
	require.NoError(t, c.Apply(ctx, []byte(manifest), kubetest.ApplyOptions{DryRun: dryRun, Strict: true, FieldManager: "dcm-servicemesh-test"}))
}

// TestRenderedObjectsAdmitted: a real API server (with Istio's CRDs)
// accepts every rendered object of two logical clouds, strictly validated
// (no unknown field), and the CRDs DCM answers. The istio namespaces are
// created for real; everything else is a server-side dry run, so no
// webhook of theirs stays behind on the shared cluster.
func TestRenderedObjectsAdmitted(t *testing.T) {
	h := kubetest.ForTests(t, 1)
	c := h.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, istiotest.InstallCRDs(ctx, c))
	hc, err := c.HTTPClient()
	require.NoError(t, err)
	crds, err := render.CRDs()
	require.NoError(t, err)
	for _, crd := range crds {
		// external-dns's CRD for real (Istio's are installed above), so
		// that the record the traffic controller writes can be admitted.
		apply(ctx, t, c, crd, !strings.Contains(crd, `"name":"dnsendpoints.externaldns.k8s.io"`))
	}
	waitEstablished(ctx, t, hc, c.Server, "dnsendpoints.externaldns.k8s.io")
	apply(ctx, t, c, `{"apiVersion":"externaldns.k8s.io/v1alpha1","kind":"DNSEndpoint",`+
		`"metadata":{"name":"shop","namespace":"default"},"spec":{"endpoints":[`+
		`{"dnsName":"shop.example.org","recordType":"A","recordTTL":300,"targets":["192.0.2.10","192.0.2.20"]}]}}`, true)
	for _, lc := range []string{"smdry1", "smdry2"} {
		in := input("smdry", lc, lc+"-istio-system")
		out, err := render.Render(in)
		require.NoError(t, err)
		first := out[0].Manifests
		apply(ctx, t, c, first[0].JSON, false) // the Namespace
		// The workload namespace, which core makes (istiod's Role there).
		apply(ctx, t, c, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+in.WorkloadNamespace+`"}}`, false)
		t.Cleanup(func() {
			for _, ns := range []string{in.IstioNamespace, in.WorkloadNamespace} {
				req, _ := http.NewRequest(http.MethodDelete, c.Server+"/api/v1/namespaces/"+ns, nil)
				if resp, err := hc.Do(req); err == nil {
					_ = resp.Body.Close()
				}
			}
		})
		for _, m := range first[1:] {
			apply(ctx, t, c, m.JSON, true)
		}
		t.Logf("%s: %d objects admitted", lc, len(first))
	}
}

// waitEstablished polls until the CRD is Established (served).
func waitEstablished(ctx context.Context, t *testing.T, hc *http.Client, server, name string) {
	t.Helper()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+name, nil)
		require.NoError(t, err)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		var crd struct {
			Status struct {
				Conditions []struct{ Type, Status string }
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&crd)
		_ = resp.Body.Close()
		require.NoError(t, err)
		for _, c := range crd.Status.Conditions {
			if c.Type == "Established" && c.Status == "True" {
				return
			}
		}
		last = fmt.Sprint(crd.Status.Conditions)
		select {
		case <-ctx.Done():
			t.Fatalf("CRD %s not Established: %s", name, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
