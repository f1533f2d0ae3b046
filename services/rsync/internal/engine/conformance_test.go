package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// The conformance suite: one table of behaviours every cluster back end
// (engine.Cluster) must show through the engine, run against each of them,
// after spicedb's pkg/datastore/test. A new back end adds one row to
// conformanceBackends; a new behaviour one entry to conformanceCases.

// conformanceBackend makes clusters of one back end for a test.
type conformanceBackend struct {
	name, short string
	// open returns a connector of at least two clusters, and their
	// provider and names.
	open func(t *testing.T) (conn engine.Connector, provider string, clusters []string)
}

var conformanceBackends = []conformanceBackend{
	{name: "Kube", short: "k", open: func(t *testing.T) (engine.Connector, string, []string) {
		h := kubetest.ForTests(t, 3)
		return newKubeClusters(h), "edge", []string{h.Clusters[0].Name, h.Clusters[1].Name}
	}},
	{name: "Simulated", short: "s", open: func(*testing.T) (engine.Connector, string, []string) {
		return newSims(2, 0), "sim", []string{"c0", "c1"}
	}},
}

// conformanceEnv is what a case gets: a running engine over recorded
// clusters of one back end.
type conformanceEnv struct {
	t        *testing.T
	e        *engine.Engine
	rec      *recorder
	provider string
	clusters []string
	// prefix makes names (namespaces, CSRs, owners) this back end's own:
	// the real clusters are shared by the package's tests.
	prefix string
}

var conformanceCases = []struct {
	name string
	run  func(env *conformanceEnv)
}{
	{"ApplyInDependencyOrder", conformanceApply},
	{"UpdateAppliesOnlyTheChangedManifest", conformanceUpdate},
	{"DeleteInReverseOrder", conformanceDelete},
	{"AnotherOwnersObjectIsRefused", conformanceOwnership},
	{"UnmanagedObjectIsRefused", conformanceUnmanaged},
	{"CSRIsApprovedAndIssued", conformanceCSR},
}

func TestConformance(t *testing.T) {
	for _, b := range conformanceBackends {
		t.Run(b.name, func(t *testing.T) {
			conn, provider, clusters := b.open(t)
			for i, c := range conformanceCases {
				t.Run(c.name, func(t *testing.T) {
					rec := &recorder{Connector: conn}
					env := &conformanceEnv{
						t: t, e: runEngine(t, storetest.Open(t), rec), rec: rec, provider: provider, clusters: clusters,
						prefix: fmt.Sprintf("conf-%s-%d", b.short, i),
					}
					c.run(env)
				})
			}
		})
	}
}

// rollout puts manifests on every cluster of the back end.
func (env *conformanceEnv) rollout(manifests []string) []*rsyncv1.ClusterResources {
	var out []*rsyncv1.ClusterResources
	for _, c := range env.clusters {
		cr := &rsyncv1.ClusterResources{Provider: env.provider, Cluster: c}
		for _, m := range manifests {
			cr.Resources = append(cr.Resources, &rsyncv1.Resource{Manifest: m})
		}
		out = append(out, cr)
	}
	return out
}

// settle submits (or updates) owner's rollout and waits until it settles
// in state at its new generation.
func (env *conformanceEnv) settle(owner string, update bool, manifests []string, state rsyncv1.State) *rsyncv1.RolloutStatus {
	env.t.Helper()
	submit := env.e.Submit
	if update {
		submit = env.e.Update
	}
	gen, err := submit(context.Background(), owner, env.rollout(manifests))
	require.NoError(env.t, err)
	return waitFor(env.t, env.e, owner, state.String(), generationSettled(gen, state))
}

// delete deletes owner's rollout and waits until it is gone.
func (env *conformanceEnv) delete(owner string) {
	env.t.Helper()
	cleanup(env.t, env.e, owner)
}

// cluster connects to the back end's cluster i directly, bypassing the
// recorder.
func (env *conformanceEnv) cluster(i int) engine.Cluster {
	env.t.Helper()
	cl, err := env.rec.Connector.Connect(context.Background(), env.provider, env.clusters[i])
	require.NoError(env.t, err)
	return cl
}

func conformanceApply(env *conformanceEnv) {
	owner := "lc/conf/" + env.prefix
	set := configMaps(env.prefix, 2)
	slices.Reverse(set) // the Namespace last: the engine applies it first
	st := env.settle(owner, false, set, rsyncv1.State_STATE_APPLIED)
	require.EqualValues(env.t, len(env.clusters)*3, st.GetReady())
	for i, c := range env.clusters {
		require.Equal(env.t, []string{"apply Namespace/" + env.prefix, "apply ConfigMap/cm-001", "apply ConfigMap/cm-000"},
			env.rec.ops(env.provider+"/"+c, "apply"), "dependencies first, then the given order")
		cm, err := env.cluster(i).Get(context.Background(), schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, env.prefix, "cm-000")
		require.NoError(env.t, err)
		require.Equal(env.t, owner, cm.GetAnnotations()[engine.OwnerAnnotation], "stamped with its owner")
	}
	env.delete(owner)
}

func conformanceUpdate(env *conformanceEnv) {
	owner := "lc/conf/" + env.prefix
	set := configMaps(env.prefix, 3)
	env.settle(owner, false, set, rsyncv1.State_STATE_APPLIED)
	env.rec.reset()
	next := slices.Clone(set)
	next[2] = fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-001", "namespace": %q}, "data": {"i": "changed"}}`, env.prefix)
	env.settle(owner, true, next, rsyncv1.State_STATE_APPLIED)
	for i, c := range env.clusters {
		require.Equal(env.t, []string{"apply ConfigMap/cm-001"}, env.rec.ops(env.provider+"/"+c, "apply"), "only the changed manifest is applied")
		require.Empty(env.t, env.rec.ops(env.provider+"/"+c, "delete"))
		cm, err := env.cluster(i).Get(context.Background(), schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, env.prefix, "cm-001")
		require.NoError(env.t, err)
		data, _, _ := unstructured.NestedString(cm.Object, "data", "i")
		require.Equal(env.t, "changed", data)
	}
	env.delete(owner)
}

func conformanceDelete(env *conformanceEnv) {
	owner := "lc/conf/" + env.prefix
	env.settle(owner, false, configMaps(env.prefix, 3), rsyncv1.State_STATE_APPLIED)
	env.rec.reset()
	env.delete(owner)
	for i, c := range env.clusters {
		require.Equal(env.t, []string{"delete ConfigMap/cm-002", "delete ConfigMap/cm-001", "delete ConfigMap/cm-000", "delete Namespace/" + env.prefix},
			env.rec.ops(env.provider+"/"+c, "delete"), "reverse order")
		_, err := env.cluster(i).Get(context.Background(), schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, env.prefix, "cm-000")
		require.Error(env.t, err, "gone")
	}
}

func conformanceOwnership(env *conformanceEnv) {
	first, second := "lc/conf/"+env.prefix+"-a", "lc/conf/"+env.prefix+"-b"
	env.settle(first, false, configMaps(env.prefix, 0), rsyncv1.State_STATE_APPLIED)
	st := env.settle(second, false, configMaps(env.prefix, 0), rsyncv1.State_STATE_FAILED)
	for i, c := range st.GetClusters() {
		r := resourceOf(c, "Namespace", env.prefix)
		require.Equal(env.t, rsyncv1.State_STATE_FAILED, r.GetState())
		require.Equal(env.t, fmt.Sprintf(`Namespace %q is managed by %s: refused`, env.prefix, first), r.GetLastError())
		ns, err := env.cluster(i).Get(context.Background(), schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "", env.prefix)
		require.NoError(env.t, err)
		require.Equal(env.t, first, ns.GetAnnotations()[engine.OwnerAnnotation], "never changed")
	}
	env.delete(second)
	for i := range env.clusters {
		_, err := env.cluster(i).Get(context.Background(), schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "", env.prefix)
		require.NoError(env.t, err, "the refused owner's delete leaves the first owner's object")
	}
	env.delete(first)
}

func conformanceUnmanaged(env *conformanceEnv) {
	owner := "lc/conf/" + env.prefix
	byHand := &unstructured.Unstructured{}
	byHand.SetAPIVersion("v1")
	byHand.SetKind("Namespace")
	byHand.SetName(env.prefix)
	for i := range env.clusters {
		_, err := env.cluster(i).Apply(context.Background(), byHand, "kubectl", false)
		require.NoError(env.t, err)
	}
	st := env.settle(owner, false, configMaps(env.prefix, 0), rsyncv1.State_STATE_FAILED)
	for _, c := range st.GetClusters() {
		require.Equal(env.t, fmt.Sprintf(`Namespace %q exists on the cluster and is not managed by DCM (no dcm.io/owner annotation): refused`, env.prefix),
			resourceOf(c, "Namespace", env.prefix).GetLastError())
	}
	env.delete(owner)
	for i := range env.clusters {
		ns, err := env.cluster(i).Get(context.Background(), schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "", env.prefix)
		require.NoError(env.t, err, "left on the cluster")
		require.Empty(env.t, ns.GetAnnotations()[engine.OwnerAnnotation], "never stamped")
		require.NoError(env.t, env.cluster(i).Delete(context.Background(), ns.GroupVersionKind(), "", env.prefix, ns.GetUID()))
	}
}

func conformanceCSR(env *conformanceEnv) {
	owner := "lc/conf/" + env.prefix
	st := env.settle(owner, false, []string{csrManifest(env.t, env.prefix+"-user", env.prefix+"-user", env.prefix)}, rsyncv1.State_STATE_APPLIED)
	for i, c := range st.GetClusters() {
		require.Equal(env.t, rsyncv1.State_STATE_APPLIED, resourceOf(c, "CertificateSigningRequest", env.prefix+"-user").GetState())
		csr, err := env.cluster(i).Get(context.Background(),
			schema.GroupVersionKind{Group: "certificates.k8s.io", Version: "v1", Kind: "CertificateSigningRequest"}, "", env.prefix+"-user")
		require.NoError(env.t, err)
		cert, _, _ := unstructured.NestedString(csr.Object, "status", "certificate")
		require.NotEmpty(env.t, cert, "APPLIED means issued")
		conditions, _, _ := unstructured.NestedSlice(csr.Object, "status", "conditions")
		require.NotEmpty(env.t, conditions, "approved")
		require.Equal(env.t, "Approved", conditions[0].(map[string]any)["type"])
	}
	env.delete(owner)
}

// recorder is a Connector that records each cluster's applies and deletes
// in the order the engine made them.
type recorder struct {
	engine.Connector
	mu  sync.Mutex
	log map[string][]string // by cluster key: "apply Kind/name", "delete Kind/name"
}

func (r *recorder) Connect(ctx context.Context, provider, cluster string) (engine.Cluster, error) {
	cl, err := r.Connector.Connect(ctx, provider, cluster)
	if err != nil {
		return nil, err
	}
	return recorded{Cluster: cl, r: r, key: provider + "/" + cluster}, nil
}

func (r *recorder) add(key, op string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.log == nil {
		r.log = map[string][]string{}
	}
	r.log[key] = append(r.log[key], op)
}

// ops lists cluster key's operations of one kind ("apply" or "delete").
func (r *recorder) ops(key, kind string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, op := range r.log[key] {
		if len(op) > len(kind) && op[:len(kind)+1] == kind+" " {
			out = append(out, op)
		}
	}
	return out
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = nil
}

type recorded struct {
	engine.Cluster
	r   *recorder
	key string
}

func (c recorded) Apply(ctx context.Context, obj *unstructured.Unstructured, manager string, force bool) (*unstructured.Unstructured, error) {
	out, err := c.Cluster.Apply(ctx, obj, manager, force)
	if err == nil {
		c.r.add(c.key, "apply "+obj.GetKind()+"/"+obj.GetName())
	}
	return out, err
}

func (c recorded) Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID) error {
	err := c.Cluster.Delete(ctx, gvk, namespace, name, uid)
	if err == nil {
		c.r.add(c.key, "delete "+gvk.Kind+"/"+name)
	}
	return err
}

// TestObjectBeingDeletedIsWaitedFor: an object that stays after its
// delete (a finalizer, as a Namespace has while its controller empties
// it) is deleted once: the retries after each wait ran out wait for it
// again rather than deleting it again; it goes when the finalizer does.
func TestObjectBeingDeletedIsWaitedFor(t *testing.T) {
	t.Parallel()
	h := kubetest.ForTests(t, 3)
	rec := &recorder{Connector: newKubeClusters(h)}
	cfg := testConfig
	cfg.DeleteWait = 200 * time.Millisecond
	e := runReplica(t, storetest.Open(t), rec, "", cfg)
	ctx := context.Background()
	const ns, owner = "held-delete", "lc/p/held"
	cm := fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "namespace": %q, "finalizers": ["dcm.test/hold"]}}`, ns)
	nsObj := fmt.Sprintf(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": %q}}`, ns)
	c := h.Clusters[0]
	_, err := e.Submit(ctx, owner, []*rsyncv1.ClusterResources{{Provider: "edge", Cluster: c.Name,
		Resources: []*rsyncv1.Resource{{Manifest: nsObj}, {Manifest: cm}}}})
	require.NoError(t, err)
	waitFor(t, e, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))

	_, err = e.Delete(ctx, owner)
	require.NoError(t, err)
	waitFor(t, e, owner, "the ConfigMap's delete retried 3 times", func(st *rsyncv1.RolloutStatus) bool {
		for _, cl := range st.GetClusters() {
			for _, r := range cl.GetResources() {
				if r.GetKind() == "ConfigMap" && r.GetState() == rsyncv1.State_STATE_RETRYING && r.GetAttempts() >= 3 {
					return true
				}
			}
		}
		return false
	})
	require.Equal(t, []string{"delete ConfigMap/held"}, rec.ops("edge/"+c.Name, "delete"), "deleted once, then waited for")

	_, err = clientset(t, c).CoreV1().ConfigMaps(ns).Patch(ctx, "held", types.JSONPatchType,
		[]byte(`[{"op": "remove", "path": "/metadata/finalizers"}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	waitFor(t, e, owner, "deleted", settledIn(rsyncv1.State_STATE_DELETED))
	require.Equal(t, "delete ConfigMap/held", rec.ops("edge/"+c.Name, "delete")[0])
	require.Len(t, slices.DeleteFunc(rec.ops("edge/"+c.Name, "delete"), func(op string) bool { return op != "delete ConfigMap/held" }), 1,
		"the ConfigMap was deleted once")
}
