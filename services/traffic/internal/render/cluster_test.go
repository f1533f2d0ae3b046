package render_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/kubetest/istiotest"
	"github.com/dcm-project/dcm/services/traffic/internal/render"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// externalDNSVersion is the external-dns release whose DNSEndpoint CRD the
// objects are checked against when the traffic module does not require
// external-dns (yet).
const externalDNSVersion = "v0.22.0"

// dnsEndpointCRD reads external-dns's DNSEndpoint CRD from the module
// cache: the version services/traffic requires, else externalDNSVersion
// (downloaded if needed).
func dnsEndpointCRD(ctx context.Context, t *testing.T) []byte {
	t.Helper()
	dir := ""
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/external-dns").Output()
	if err == nil {
		dir = strings.TrimSpace(string(out))
	}
	if dir == "" {
		cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "sigs.k8s.io/external-dns@"+externalDNSVersion)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.Output()
		require.NoError(t, err, "go mod download sigs.k8s.io/external-dns: %s", out)
		var m struct{ Dir, Error string }
		require.NoError(t, json.Unmarshal(out, &m))
		require.Empty(t, m.Error)
		dir = m.Dir
	}
	b, err := os.ReadFile(filepath.Join(dir, "config", "crd", "standard", "dnsendpoints.externaldns.k8s.io.yaml"))
	require.NoError(t, err)
	return b
}

// apply server-side applies one manifest, strictly validated (a field
// the CRD's schema does not have is refused, not pruned).
func apply(ctx context.Context, c *kubetest.Cluster, manifest string) error {
	return c.Apply(ctx, []byte(manifest), kubetest.ApplyOptions{Strict: true, FieldManager: "dcm-traffic-test"})
}

// TestRenderedObjectsAdmitted: a real API server with Istio's CRDs and
// external-dns's DNSEndpoint CRD admits every object of the whole group
// and of the variants, strictly validated, in the logical cloud's
// namespace. Both clusters'
// objects go to the one API server (the second cluster's replace the
// first's of the same name: both are admitted).
func TestRenderedObjectsAdmitted(t *testing.T) {
	h := kubetest.ForTests(t, 1)
	c := h.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, istiotest.InstallCRDs(ctx, c))
	hc, err := c.HTTPClient()
	require.NoError(t, err)
	_, err = istiotest.Apply(ctx, c, dnsEndpointCRD(ctx, t))
	require.NoError(t, err)

	in := wholeGroup(t)
	_, err = istiotest.Apply(ctx, c, []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+in.Namespace+`"}}`))
	require.NoError(t, err)
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, c.Server+"/api/v1/namespaces/"+in.Namespace, nil)
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	})
	out, _, err := render.Render(in)
	require.NoError(t, err)
	more, _, err := render.Render(variants(t))
	require.NoError(t, err)
	out = append(out, more...)
	n := 0
	for _, cm := range out {
		for _, m := range cm.Manifests {
			require.NoError(t, apply(ctx, c, m), "on %s", cm.Cluster)
			n++
		}
	}
	t.Logf("%d objects admitted", n)
	// The same server refuses a field the schemas do not have, so that
	// admitting means the objects fit them.
	bad := `{"apiVersion":"externaldns.k8s.io/v1alpha1","kind":"DNSEndpoint","metadata":{"name":"bad","namespace":"` + in.Namespace +
		`"},"spec":{"endpoints":[{"dnsName":"a.example.com","recordType":"A","targets":["192.0.2.1"],"ttl":300}]}}`
	require.ErrorContains(t, apply(ctx, c, bad), "ttl")
	bad = `{"apiVersion":"networking.istio.io/v1","kind":"ServiceEntry","metadata":{"name":"bad","namespace":"` + in.Namespace +
		`"},"spec":{"hosts":["a.example.com"],"resolution":"SOMETIMES"}}`
	require.Error(t, apply(ctx, c, bad))
}
