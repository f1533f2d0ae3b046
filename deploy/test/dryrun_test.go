package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/dcm-project/dcm/platform/kubetest"
)

// certManager is the cert-manager release whose CRDs the overlays'
// Issuers and Certificates are checked against: its Go module, pinned by
// version and checksum (go.sum's h1: hash of the module's zip), ships them
// in deploy/crds/.
const (
	certManager    = "github.com/cert-manager/cert-manager@v1.21.2"
	certManagerSum = "h1:UWgoYM+KLNtRlqmoWOKjKBOBUPVHeepQ6/ac3ERJW68="
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// certManagerCRDs fetches the pinned cert-manager module through the Go
// module proxy (or the module cache) and returns its CRDs' files.
func certManagerCRDs(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", certManager)
	cmd.Dir = t.TempDir() // outside any module: go.mod and go.work stay untouched
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go mod download %s: %s", certManager, stderr.String())
	var mod struct{ Dir, Sum, Error string }
	require.NoError(t, json.Unmarshal(out, &mod))
	require.Empty(t, mod.Error)
	require.Equal(t, certManagerSum, mod.Sum, "the module is the pinned one")
	files, err := filepath.Glob(filepath.Join(mod.Dir, "deploy", "crds", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "%s ships deploy/crds/*.yaml", certManager)
	return files
}

// applier server-side applies objects to one cluster, collecting the
// API server's warnings (an unknown field, a Pod Security violation of
// a Deployment's pods, a deprecated API): each is a failure.
type applier struct {
	client dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper

	mu       sync.Mutex
	warnings []string
}

func (a *applier) HandleWarningHeader(_ int, _ string, text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.warnings = append(a.warnings, text)
}

func (a *applier) takeWarnings() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.warnings
	a.warnings = nil
	return w
}

func newApplier(t *testing.T, c *kubetest.Cluster) *applier {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
	require.NoError(t, err)
	a := &applier{}
	cfg.WarningHandler = a
	// client-go's default rate limit (5 per second) would make a hundred
	// applies take twenty seconds.
	cfg.QPS, cfg.Burst = 200, 400
	a.client, err = dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	a.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	return a
}

// apply server-side applies one object; dryRun has the API server check
// and admit it (validation, defaulting, admission) without storing it.
func (a *applier) apply(ctx context.Context, doc []byte, dryRun bool) error {
	var u unstructured.Unstructured
	if err := yaml.Unmarshal(doc, &u.Object); err != nil {
		return err
	}
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset() // a CRD just established
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return err
	}
	var r dynamic.ResourceInterface = a.client.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = a.client.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	opts := metav1.ApplyOptions{FieldManager: "deploytest", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = r.Apply(ctx, u.GetName(), &u, opts)
	return err
}

// TestOverlaysApply: every object of each overlay is admitted by a real
// API server with server-side dry-run, after cert-manager's CRDs (from
// its pinned module) and the Namespace are installed, with no warning:
// no unknown or misplaced field, no deprecated API, and the pods meet the
// restricted Pod Security Standard the Namespace enforces. The cluster
// has no nodes: no pod runs, nothing is pulled.
func TestOverlaysApply(t *testing.T) {
	t.Parallel()
	h := kubetest.ForTests(t, 1) // skips under -short
	crds := certManagerCRDs(t)
	a := newApplier(t, h.Clusters[0])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, f := range crds {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, a.apply(ctx, b, false), filepath.Base(f))
	}
	require.Empty(t, a.takeWarnings(), "cert-manager's CRDs")

	for overlay := range overlays {
		objs := build(t, overlay)
		// The Namespace for real first: dry-run objects in a namespace
		// that does not exist are refused.
		for _, o := range objs {
			if o.Kind == "Namespace" {
				require.NoError(t, a.apply(ctx, o.YAML, false), "%s: Namespace %s", overlay, o.Name)
			}
		}
		for _, o := range objs {
			// A CRD is served a moment after it is established: retry
			// what the API server does not know yet, up to a deadline.
			var err error
			for deadline := time.Now().Add(30 * time.Second); ; {
				err = a.apply(ctx, o.YAML, true)
				if err == nil || (!meta.IsNoMatchError(err) && !apierrors.IsNotFound(err)) || time.Now().After(deadline) {
					break
				}
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
			require.NoError(t, err, "%s: %s %s", overlay, o.Kind, o.Name)
			require.Empty(t, a.takeWarnings(), "%s: %s %s", overlay, o.Kind, o.Name)
		}
		t.Logf("%s: %d objects admitted (dry-run)", overlay, len(objs))
	}
}
