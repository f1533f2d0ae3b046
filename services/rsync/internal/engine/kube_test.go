package engine_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// kubeClusters connects to the harness's clusters as provider "edge".
type kubeClusters struct {
	mu      sync.Mutex
	configs map[string][]byte
	clients map[string]*engine.Kube
	// applies counts Apply calls per cluster.
	applies map[string]int
}

func newKubeClusters(h *kubetest.Harness) *kubeClusters {
	k := &kubeClusters{configs: map[string][]byte{}, clients: map[string]*engine.Kube{}, applies: map[string]int{}}
	for _, c := range h.Clusters {
		k.configs["edge/"+c.Name] = c.Kubeconfig
	}
	return k
}

func (k *kubeClusters) Known(_ context.Context, provider, cluster string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.configs[provider+"/"+cluster]; !ok {
		return errs.NotFound("cluster %s/%s not found", provider, cluster)
	}
	return nil
}

// unregister deletes a cluster from the registry.
func (k *kubeClusters) unregister(provider, cluster string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.configs, provider+"/"+cluster)
}

func (k *kubeClusters) Connect(ctx context.Context, provider, cluster string) (engine.Cluster, error) {
	if err := k.Known(ctx, provider, cluster); err != nil {
		return nil, engine.Terminal(fmt.Errorf("%w: %w", engine.ErrUnregistered, err))
	}
	key := provider + "/" + cluster
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.clients[key]; !ok {
		cl, err := engine.NewKube(k.configs[key])
		if err != nil {
			return nil, err
		}
		k.clients[key] = cl
	}
	return counting{Cluster: k.clients[key], k: k, key: key}, nil
}

type unstructuredT = unstructured.Unstructured

// counting counts a cluster's Apply calls.
type counting struct {
	engine.Cluster
	k   *kubeClusters
	key string
}

func (c counting) Apply(ctx context.Context, obj *unstructuredT, manager string, force bool) (*unstructuredT, error) {
	c.k.mu.Lock()
	c.k.applies[c.key]++
	c.k.mu.Unlock()
	return c.Cluster.Apply(ctx, obj, manager, force)
}

func (k *kubeClusters) totalApplies() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, v := range k.applies {
		n += v
	}
	return n
}

// testConfig retries fast, so that tests converge soon after a cluster
// is back.
var testConfig = engine.Config{
	Concurrency: 8, RetryBase: 100 * time.Millisecond, RetryMax: time.Second,
	Checkpoint: 200 * time.Millisecond, CertificateWait: 5 * time.Second, DeleteWait: 5 * time.Second,
}

// runEngine starts an engine on st until the test ends.
func runEngine(t *testing.T, st *store.Store, conn engine.Connector) *engine.Engine {
	t.Helper()
	return runReplica(t, st, conn, "", testConfig)
}

// clientset is an admin client of a harness cluster.
func clientset(t *testing.T, c *kubetest.Cluster) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// waitFor polls the rollout's status until ok holds, failing the test
// after a minute with the last status.
func waitFor(t *testing.T, e *engine.Engine, owner string, what string, ok func(*rsyncv1.RolloutStatus) bool) *rsyncv1.RolloutStatus {
	t.Helper()
	return waitForWithin(t, e, owner, what, time.Minute, ok)
}

// waitForWithin is waitFor with another deadline than a minute.
func waitForWithin(t *testing.T, e *engine.Engine, owner string, what string, within time.Duration, ok func(*rsyncv1.RolloutStatus) bool) *rsyncv1.RolloutStatus {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := e.Status(context.Background(), owner)
		require.NoError(t, err)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollout %s: not %s after %v; last status:\n%s", owner, what, within, describeStatus(st))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func describeStatus(st *rsyncv1.RolloutStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "gen %d %s ready %d/%d\n", st.GetGeneration(), st.GetState(), st.GetReady(), st.GetTotal())
	for _, c := range st.GetClusters() {
		fmt.Fprintf(&b, "  %s/%s %s %d/%d %s\n", c.GetProvider(), c.GetCluster(), c.GetState(), c.GetReady(), c.GetTotal(), c.GetLastError())
		for _, r := range c.GetResources() {
			fmt.Fprintf(&b, "    %s %s/%s %s %s attempts=%d %s\n", r.GetKind(), r.GetNamespace(), r.GetName(), r.GetOperation(), r.GetState(), r.GetAttempts(), r.GetLastError())
		}
	}
	return b.String()
}

func settledIn(state rsyncv1.State) func(*rsyncv1.RolloutStatus) bool {
	return func(st *rsyncv1.RolloutStatus) bool { return st.GetSettled() && st.GetState() == state }
}

// csrManifest is a CertificateSigningRequest for user in group, to the
// kube-apiserver-client signer.
func csrManifest(t *testing.T, name, user, group string) string {
	t.Helper()
	csr, _, err := kube.NewCSR(user, group)
	require.NoError(t, err)
	return kube.CSRManifest(name, csr, nil)
}

// tenant is a logical-cloud-sized set of manifests in namespace ns: a
// custom resource listed before its CRD (the engine puts the CRD first),
// then the namespace and what lives in it.
func tenant(t *testing.T, ns string) []string {
	return []string{
		fmt.Sprintf(`{"apiVersion": "dcm.io/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": %q}, "spec": {"size": 3}}`, ns),
		fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels: {dcm.io/test: %s}`, ns, ns),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": %q}, "data": {"k": "v"}}`, ns),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": %q}, "data": {"k": "v"}}`, ns),
		fmt.Sprintf(`{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "dev", "namespace": %q},
 "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}`, ns),
		fmt.Sprintf(`{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "dev", "namespace": %q},
 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "dev"},
 "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "%s-user"}]}`, ns, ns),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "quota", "namespace": %q}, "spec": {"hard": {"configmaps": "10"}}}`, ns),
		csrManifest(t, ns+"-user", ns+"-user", ns),
		crd,
	}
}

const crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.dcm.io}
spec:
  group: dcm.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true`

// rollout puts the same manifests on the given clusters.
func rollout(h *kubetest.Harness, manifests []string, clusters ...int) []*rsyncv1.ClusterResources {
	var out []*rsyncv1.ClusterResources
	for _, i := range clusters {
		cr := &rsyncv1.ClusterResources{Provider: "edge", Cluster: h.Clusters[i].Name}
		for _, m := range manifests {
			cr.Resources = append(cr.Resources, &rsyncv1.Resource{Manifest: m})
		}
		out = append(out, cr)
	}
	return out
}

func TestApplyUpdateDeleteOnRealClusters(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	st := storetest.Open(t)
	e := runEngine(t, st, newKubeClusters(h))
	ctx := context.Background()
	const ns = "tenant-a"
	set := tenant(t, ns)

	gen, err := e.Submit(ctx, "lc/p/a", rollout(h, set, 0, 1, 2))
	require.NoError(t, err)
	require.EqualValues(t, 1, gen)
	st1 := waitFor(t, e, "lc/p/a", "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	require.EqualValues(t, 3*len(set), st1.GetTotal())
	require.Equal(t, st1.GetTotal(), st1.GetReady())
	for _, c := range st1.GetClusters() {
		kinds := []string{}
		for _, r := range c.GetResources() {
			kinds = append(kinds, r.GetKind())
		}
		require.Equal(t, []string{"Namespace", "CustomResourceDefinition", "Widget", "ConfigMap", "ConfigMap",
			"Role", "RoleBinding", "ResourceQuota", "CertificateSigningRequest"}, kinds, "dependencies first, then the given order")
	}

	for _, c := range h.Clusters {
		cs := clientset(t, c)
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "b", metav1.GetOptions{})
		require.NoError(t, err, c.Name)
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "a", metav1.GetOptions{})
		require.NoError(t, err, c.Name)
		require.Equal(t, "dcm/lc/p/a", cm.GetManagedFields()[0].Manager, "server-side apply under the owner's field manager")
		require.Equal(t, "lc/p/a", cm.GetAnnotations()[engine.OwnerAnnotation], "stamped with its owner")
		// The CSR step: approved, and a certificate from this cluster's own signer.
		csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, ns+"-user", metav1.GetOptions{})
		require.NoError(t, err)
		block, _ := pem.Decode(csr.Status.Certificate)
		require.NotNil(t, block, "%s: issued certificate", c.Name)
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		require.Equal(t, ns+"-user", cert.Subject.CommonName)
		require.NoError(t, cert.CheckSignatureFrom(c.CA.Cert), "%s: signed by the cluster's CA", c.Name)
	}

	// Update: drop ConfigMap b everywhere, and cluster-3 altogether.
	var dropped []string
	for _, m := range set {
		if !strings.Contains(m, `"name": "b"`) {
			dropped = append(dropped, m)
		}
	}
	gen, err = e.Update(ctx, "lc/p/a", rollout(h, dropped, 0, 1))
	require.NoError(t, err)
	require.EqualValues(t, 2, gen)
	st2 := waitFor(t, e, "lc/p/a", "updated", func(st *rsyncv1.RolloutStatus) bool {
		return st.GetGeneration() == 2 && settledIn(rsyncv1.State_STATE_APPLIED)(st)
	})
	require.Equal(t, rsyncv1.State_STATE_DELETED, st2.GetClusters()[2].GetState(), "cluster-3 emptied")
	for i, c := range h.Clusters {
		cs := clientset(t, c)
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "b", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "%s: dropped ConfigMap b: %v", c.Name, err)
		_, err = cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if i == 2 {
			require.True(t, apierrors.IsNotFound(err), "%s: dropped cluster's namespace: %v", c.Name, err)
		} else {
			require.NoError(t, err)
		}
	}

	// Delete: everything goes, CSRs and the CRD included.
	_, err = e.Delete(ctx, "lc/p/a")
	require.NoError(t, err)
	waitFor(t, e, "lc/p/a", "deleted", settledIn(rsyncv1.State_STATE_DELETED))
	for _, c := range h.Clusters {
		cs := clientset(t, c)
		nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: "dcm.io/test=" + ns})
		require.NoError(t, err)
		require.Empty(t, nss.Items, c.Name)
		_, err = cs.CertificatesV1().CertificateSigningRequests().Get(ctx, ns+"-user", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "%s: CSR: %v", c.Name, err)
	}

	// A deleted rollout can be submitted anew.
	_, err = e.Submit(ctx, "lc/p/a", rollout(h, set[1:3], 0))
	require.NoError(t, err)
	waitFor(t, e, "lc/p/a", "applied again", settledIn(rsyncv1.State_STATE_APPLIED))
	_, err = e.Delete(ctx, "lc/p/a")
	require.NoError(t, err)
	waitFor(t, e, "lc/p/a", "deleted again", settledIn(rsyncv1.State_STATE_DELETED))
}
