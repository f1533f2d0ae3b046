package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

func TestFieldManager(t *testing.T) {
	t.Parallel()
	long := "lc/" + strings.Repeat("p", 63) + "/" + strings.Repeat("l", 63)
	for owner, want := range map[string]string{
		"lc/p1/lc1":                    "dcm/lc/p1/lc1",
		strings.Repeat("a", 124):       "dcm/" + strings.Repeat("a", 124),
		strings.Repeat("a", 125):       "dcm/sha256:",
		long:                           "dcm/sha256:",
		"lc/" + strings.Repeat("x", 9): "dcm/lc/xxxxxxxxx",
	} {
		got := engine.FieldManager(owner)
		require.LessOrEqual(t, len(got), 128, owner)
		require.True(t, strings.HasPrefix(got, want), "%s: %s", owner, got)
		if strings.HasSuffix(want, ":") {
			require.Len(t, got, len("dcm/sha256:")+16, owner)
		}
	}
	require.NotEqual(t, engine.FieldManager(long), engine.FieldManager(long+"x"), "hashes differ per owner")
}

// startEngine runs an engine on st until stop is called (or the test ends).
func startEngine(t *testing.T, st *store.Store, conn engine.Connector) (*engine.Engine, func()) {
	t.Helper()
	return startNamed(t, st, conn, "", testConfig)
}

// startNamed is startEngine for a replica named name, with cfg.
func startNamed(t *testing.T, st *store.Store, conn engine.Connector, name string, cfg engine.Config) (*engine.Engine, func()) {
	t.Helper()
	cfg.Replica = name
	e := engine.New(st, conn, cfg, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(t, <-done)
		}
	}
	t.Cleanup(stop)
	return e, stop
}

// snapshot is an object as the cluster stores it: its resourceVersion and
// its whole JSON.
type snapshot struct {
	ResourceVersion string
	JSON            string
}

func namespaceSnapshot(t *testing.T, c *kubetest.Cluster, name string) snapshot {
	t.Helper()
	ns, err := clientset(t, c).CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	js, err := json.Marshal(ns)
	require.NoError(t, err)
	return snapshot{ns.ResourceVersion, string(js)}
}

// namespaceWith is a Namespace manifest with a label, and a ConfigMap and
// a RoleBinding in it (what a tenant would put there).
func namespaceWith(ns, label string) []string {
	return []string{
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": %q, "labels": {"dcm.io/test": %q}}}`, ns, label),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-%s", "namespace": %q}, "data": {"k": "v"}}`, label, ns),
		fmt.Sprintf(`{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "from-%s", "namespace": %q},
 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
 "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "%s-user"}]}`, label, ns, label),
	}
}

// resourceOf finds a resource of a cluster's status by kind and name.
func resourceOf(c *rsyncv1.RolloutClusterStatus, kind, name string) *rsyncv1.ResourceStatus {
	for _, r := range c.GetResources() {
		if r.GetKind() == kind && r.GetName() == name {
			return r
		}
	}
	return &rsyncv1.ResourceStatus{}
}

func generationSettled(gen int64, state rsyncv1.State) func(*rsyncv1.RolloutStatus) bool {
	return func(st *rsyncv1.RolloutStatus) bool { return st.GetGeneration() == gen && settledIn(state)(st) }
}

func TestTwoOwnersOfOneNamespace(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	e := runEngine(t, storetest.Open(t), newKubeClusters(h))
	ctx := context.Background()
	const ns, first, second = "ns-a", "lc/ta/lc", "lc/tb/lc"
	c := h.Clusters[0]
	_, err := e.Submit(ctx, first, rollout(h, namespaceWith(ns, "ta"), 0))
	require.NoError(t, err)
	waitFor(t, e, first, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	before := namespaceSnapshot(t, c, ns)
	require.Contains(t, before.JSON, `"dcm.io/owner":"lc/ta/lc"`)

	untouched := func(after string) {
		t.Helper()
		require.Equal(t, before, namespaceSnapshot(t, c, ns), "the first owner's Namespace after the second's %s", after)
		_, err := clientset(t, c).CoreV1().ConfigMaps(ns).Get(ctx, "from-tb", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "nothing of the second owner's in the first's namespace after %s: %v", after, err)
		_, err = clientset(t, c).RbacV1().RoleBindings(ns).Get(ctx, "from-tb", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "no RoleBinding of the second owner's in the first's namespace after %s: %v", after, err)
		st, err := e.Status(ctx, first)
		require.NoError(t, err)
		require.Equal(t, rsyncv1.State_STATE_APPLIED, st.GetState(), "the first owner's rollout after the second's %s", after)
	}

	_, err = e.Submit(ctx, second, rollout(h, namespaceWith(ns, "tb"), 0))
	require.NoError(t, err)
	st := waitFor(t, e, second, "failed", settledIn(rsyncv1.State_STATE_FAILED))
	cs := st.GetClusters()[0]
	require.Equal(t, `Namespace "ns-a" is managed by lc/ta/lc: refused`, resourceOf(cs, "Namespace", ns).GetLastError())
	require.Equal(t, rsyncv1.State_STATE_FAILED, resourceOf(cs, "Namespace", ns).GetState())
	for _, kind := range []string{"ConfigMap", "RoleBinding"} {
		r := resourceOf(cs, kind, "from-tb")
		require.Equal(t, rsyncv1.State_STATE_FAILED, r.GetState(), kind)
		require.Contains(t, r.GetLastError(), `Namespace "ns-a" is not this owner's`, kind)
	}
	untouched("apply")

	// An update is refused the same way.
	_, err = e.Update(ctx, second, rollout(h, namespaceWith(ns, "tb2"), 0))
	require.NoError(t, err)
	st = waitFor(t, e, second, "failed again", generationSettled(2, rsyncv1.State_STATE_FAILED))
	require.Equal(t, `Namespace "ns-a" is managed by lc/ta/lc: refused`, resourceOf(st.GetClusters()[0], "Namespace", ns).GetLastError())
	untouched("update")

	// Its delete leaves the first owner's objects alone, saying so.
	_, err = e.Delete(ctx, second)
	require.NoError(t, err)
	st = waitFor(t, e, second, "deleted", settledIn(rsyncv1.State_STATE_DELETED))
	r := resourceOf(st.GetClusters()[0], "Namespace", ns)
	require.Equal(t, rsyncv1.State_STATE_DELETED, r.GetState())
	require.Equal(t, `left on the cluster, not deleted: Namespace "ns-a" is managed by lc/ta/lc`, r.GetLastError())
	require.False(t, r.GetOwned())
	untouched("delete")

	cleanup(t, e, first)
	_, err = clientset(t, c).CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the first owner's delete removes its namespace: %v", err)
}

// TestGuestInHostNamespace: a rollout whose host is the namespace's owner
// (a traffic intent group in its logical cloud's namespace) puts its
// objects there and deletes them, leaving the host's; a guest of another
// host is refused as any other owner.
func TestGuestInHostNamespace(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	e := runEngine(t, storetest.Open(t), newKubeClusters(h))
	ctx := context.Background()
	const ns, host, guest, stranger = "ns-guest", "lc/tg/lc", "traffic/tg/rb/v1/g", "traffic/tg/rb/v1/other"
	c := h.Clusters[0]
	_, err := e.Submit(ctx, host, rollout(h, namespaceWith(ns, "host"), 0))
	require.NoError(t, err)
	waitFor(t, e, host, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	guestCM := []string{fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-guest", "namespace": %q}, "data": {"k": "v"}}`, ns)}

	_, err = e.SubmitGuest(ctx, guest, host, nil, rollout(h, guestCM, 0))
	require.NoError(t, err)
	waitFor(t, e, guest, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	cm, err := clientset(t, c).CoreV1().ConfigMaps(ns).Get(ctx, "from-guest", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, guest, cm.Annotations[engine.OwnerAnnotation])

	_, err = e.SubmitGuest(ctx, stranger, "lc/tg/another", nil, rollout(h, []string{strings.Replace(guestCM[0], "from-guest", "from-stranger", 1)}, 0))
	require.NoError(t, err)
	st := waitFor(t, e, stranger, "failed", settledIn(rsyncv1.State_STATE_FAILED))
	require.Contains(t, resourceOf(st.GetClusters()[0], "ConfigMap", "from-stranger").GetLastError(), `Namespace "ns-guest" is managed by lc/tg/lc: refused`)
	cleanup(t, e, stranger)

	cleanup(t, e, guest)
	_, err = clientset(t, c).CoreV1().ConfigMaps(ns).Get(ctx, "from-guest", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the guest's delete removes its object: %v", err)
	_, err = clientset(t, c).CoreV1().ConfigMaps(ns).Get(ctx, "from-host", metav1.GetOptions{})
	require.NoError(t, err, "the host's objects stay")
	cleanup(t, e, host)
}

// TestUnmanagedNamespacesAreRefused claims namespaces DCM did not create:
// each rollout fails, and neither its apply nor its delete touches them.
func TestUnmanagedNamespacesAreRefused(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	e := runEngine(t, storetest.Open(t), newKubeClusters(h))
	ctx := context.Background()
	c := h.Clusters[1]
	cs := clientset(t, c)
	_, err := cs.CoreV1().Namespaces().Apply(ctx, corev1ac.Namespace("by-hand").WithLabels(map[string]string{"team": "ops"}),
		metav1.ApplyOptions{FieldManager: "kubectl"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), "by-hand", metav1.DeleteOptions{}) })

	for i, ns := range []string{"by-hand", "default", "kube-system"} {
		t.Run(ns, func(t *testing.T) {
			owner := fmt.Sprintf("lc/p/claim-%d", i)
			before := namespaceSnapshot(t, c, ns)
			_, err := e.Submit(ctx, owner, rollout(h, namespaceWith(ns, "claim"), 1))
			require.NoError(t, err)
			st := waitFor(t, e, owner, "failed", settledIn(rsyncv1.State_STATE_FAILED))
			r := resourceOf(st.GetClusters()[0], "Namespace", ns)
			require.Equal(t, rsyncv1.State_STATE_FAILED, r.GetState())
			require.Equal(t, fmt.Sprintf(`Namespace %q exists on the cluster and is not managed by DCM (no dcm.io/owner annotation): refused`, ns), r.GetLastError())
			require.Equal(t, before, namespaceSnapshot(t, c, ns), "untouched by the apply")
			_, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, "from-claim", metav1.GetOptions{})
			require.True(t, apierrors.IsNotFound(err), "nothing put in it: %v", err)

			_, err = e.Delete(ctx, owner)
			require.NoError(t, err)
			st = waitFor(t, e, owner, "deleted", settledIn(rsyncv1.State_STATE_DELETED))
			r = resourceOf(st.GetClusters()[0], "Namespace", ns)
			require.Equal(t, fmt.Sprintf(`left on the cluster, not deleted: Namespace %q is not managed by DCM`, ns), r.GetLastError())
			require.Equal(t, before, namespaceSnapshot(t, c, ns), "untouched by the delete")
		})
	}
}

// TestConcurrentOwnersOneWins has two engines that know nothing of each
// other (separate stores) create the same objects at once: each goes to
// exactly one owner, the other is refused naming it.
func TestConcurrentOwnersOneWins(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	ctx := context.Background()
	c := h.Clusters[2]
	cs := clientset(t, c)
	const ns = "race"
	_, err := cs.CoreV1().Namespaces().Apply(ctx, corev1ac.Namespace(ns), metav1.ApplyOptions{FieldManager: "kubectl"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	ea := runEngine(t, storetest.Open(t), newKubeClusters(h))
	eb := runEngine(t, storetest.Open(t), newKubeClusters(h))
	var set []string
	for i := range 30 {
		set = append(set, fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "race-%02d", "namespace": %q}}`, i, ns))
	}
	owners := map[*engine.Engine]string{ea: "lc/p/race-a", eb: "lc/p/race-b"}
	start := make(chan struct{})
	errc := make(chan error, 2)
	for e, owner := range owners {
		go func() {
			<-start
			_, err := e.Submit(ctx, owner, rollout(h, set, 2))
			errc <- err
		}()
	}
	close(start)
	require.NoError(t, <-errc)
	require.NoError(t, <-errc)
	settled := map[string]*rsyncv1.RolloutClusterStatus{}
	for e, owner := range owners {
		st := waitFor(t, e, owner, "settled", func(st *rsyncv1.RolloutStatus) bool { return st.GetSettled() })
		settled[owner] = st.GetClusters()[0]
	}
	wins := map[string]int{}
	for i := range set {
		name := fmt.Sprintf("race-%02d", i)
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		winner := cm.Annotations[engine.OwnerAnnotation]
		wins[winner]++
		for owner, c := range settled {
			r := resourceOf(c, "ConfigMap", name)
			if owner == winner {
				require.Equal(t, rsyncv1.State_STATE_APPLIED, r.GetState(), "%s: the winner %s", name, owner)
				continue
			}
			require.Equal(t, rsyncv1.State_STATE_FAILED, r.GetState(), "%s: the loser %s", name, owner)
			require.Equal(t, fmt.Sprintf(`ConfigMap "race/%s" is managed by %s: refused`, name, winner), r.GetLastError())
		}
	}
	require.Equal(t, len(set), wins["lc/p/race-a"]+wins["lc/p/race-b"], "every object has one of the two owners: %v", wins)
	t.Logf("objects won: %v", wins)
	for e, owner := range owners {
		cleanup(t, e, owner)
	}
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, cm := range list.Items {
		require.False(t, strings.HasPrefix(cm.Name, "race-"), "%s: deleted by its owner", cm.Name)
	}
}

// TestRestartKeepsOwnership restarts the engine on the same store: the
// record still refuses another owner, even once the annotation was removed
// by hand.
func TestRestartKeepsOwnership(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	st := storetest.Open(t)
	ctx := context.Background()
	const ns, first, second = "ns-restart", "lc/ta/restart", "lc/tb/restart"
	c := h.Clusters[0]
	e1, stop := startEngine(t, st, newKubeClusters(h))
	_, err := e1.Submit(ctx, first, rollout(h, namespaceWith(ns, "ta"), 0))
	require.NoError(t, err)
	waitFor(t, e1, first, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	stop()

	// Only the record can tell now.
	_, err = clientset(t, c).CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json",
		[]byte(`{"metadata": {"annotations": {"dcm.io/owner": null}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	before := namespaceSnapshot(t, c, ns)

	e2 := runEngine(t, st, newKubeClusters(h))
	_, err = e2.Submit(ctx, second, rollout(h, namespaceWith(ns, "tb"), 0))
	require.NoError(t, err)
	got := waitFor(t, e2, second, "failed", settledIn(rsyncv1.State_STATE_FAILED))
	require.Equal(t, `Namespace "ns-restart" is managed by lc/ta/restart: refused`, resourceOf(got.GetClusters()[0], "Namespace", ns).GetLastError())
	require.Equal(t, before, namespaceSnapshot(t, c, ns), "refused without a change")
	owners, err := e2.ObjectOwners(ctx, second, "v1", "Namespace", "", ns, []*rsyncv1.ClusterRef{{Provider: "edge", Cluster: c.Name}})
	require.NoError(t, err)
	require.Equal(t, rsyncv1.Ownership_OWNERSHIP_OTHER_OWNER, owners[0].GetState())
	require.Equal(t, first, owners[0].GetOwner())

	cleanup(t, e2, second)
	require.Equal(t, before, namespaceSnapshot(t, c, ns), "the second owner's delete left it alone")
	// The first owner's update stamps its namespace again, and its delete removes it.
	_, err = e2.Update(ctx, first, rollout(h, namespaceWith(ns, "ta2"), 0))
	require.NoError(t, err)
	waitFor(t, e2, first, "applied", generationSettled(2, rsyncv1.State_STATE_APPLIED))
	require.Contains(t, namespaceSnapshot(t, c, ns).JSON, `"dcm.io/owner":"lc/ta/restart"`)
	cleanup(t, e2, first)
}

// legacyRollout stores a rollout and its cluster state as rsync did before
// it stamped owners (no owned flags), with every resource applied, and
// applies the objects as it did: under the field manager "dcm", without
// the owner annotation.
func legacyRollout(t *testing.T, st *store.Store, c *kubetest.Cluster, owner string, deleting bool, manifests []string) {
	t.Helper()
	ctx := context.Background()
	rec := &rsyncv1.StoredRollout{Owner: owner, Generation: 1, Manifests: manifests, Deleting: deleting,
		Targets: []*rsyncv1.StoredTarget{{Provider: "edge", Cluster: c.Name}}}
	state := &rsyncv1.StoredClusterState{Owner: owner, Provider: "edge", Cluster: c.Name, Generation: 1}
	kube, err := engine.NewKube(c.Kubeconfig)
	require.NoError(t, err)
	for i, m := range manifests {
		rec.Targets[0].Manifests = append(rec.Targets[0].Manifests, int32(i))
		var obj unstructuredT
		require.NoError(t, obj.UnmarshalJSON([]byte(m)))
		_, err := kube.Apply(ctx, &obj, "dcm", false)
		require.NoError(t, err)
		sum := sha256.Sum256([]byte(m))
		op, state1 := rsyncv1.Operation_OPERATION_APPLY, rsyncv1.State_STATE_APPLIED
		if deleting {
			op, state1 = rsyncv1.Operation_OPERATION_DELETE, rsyncv1.State_STATE_PENDING
		}
		state.Resources = append(state.Resources, &rsyncv1.ResourceStatus{
			ApiVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(),
			Operation: op, State: state1, Generation: 1, ManifestHash: "sha256:" + hex.EncodeToString(sum[:]),
		})
	}
	if deleting {
		rec.Generation, state.Generation = 2, 1
		for _, r := range state.Resources {
			r.Generation = 2
		}
	}
	require.NoError(t, store.NewRecords(st, "rollouts", "rollout", func() *rsyncv1.StoredRollout { return &rsyncv1.StoredRollout{} }).
		Create(ctx, owner, "", rec))
	require.NoError(t, store.NewRecords(st, "rollout_clusters", "state", func() *rsyncv1.StoredClusterState { return &rsyncv1.StoredClusterState{} }).
		Create(ctx, store.Key(owner, "edge", c.Name), owner, state))
}

// TestLegacyObjectsAreAdopted starts the engine on what an older rsync
// left: objects applied under the field manager "dcm" without the owner
// annotation, recorded as applied for their owner.
func TestLegacyObjectsAreAdopted(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	ctx := context.Background()
	c := h.Clusters[1]
	cs := clientset(t, c)
	const ns, owner = "legacy", "lc/p/legacy"
	labels := `{"dcm.io/project": "p", "dcm.io/logical-cloud": "legacy"}`
	binding := func(user string) string {
		return fmt.Sprintf(`{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "dev", "namespace": %q, "labels": %s},
 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
 "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": %q}]}`, ns, labels, user)
	}
	manifests := []string{
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": %q, "labels": %s}}`, ns, labels),
		binding("alice"),
	}
	// A second legacy owner, deleting: one ConfigMap still carries the
	// labels it applied, one was relabelled by hand since.
	const oldOwner = "lc/p/legacy-gone"
	gone := []string{
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept-labels", "namespace": "default", "labels": %s}}`, labels),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "relabelled", "namespace": "default", "labels": %s}}`, labels),
	}
	st := storetest.Open(t)
	legacyRollout(t, st, c, owner, false, manifests)
	legacyRollout(t, st, c, oldOwner, true, gone)
	_, err := cs.CoreV1().ConfigMaps("default").Patch(ctx, "relabelled", "application/merge-patch+json",
		[]byte(`{"metadata": {"labels": {"dcm.io/logical-cloud": "someone-else"}}}`), metav1.PatchOptions{FieldManager: "kubectl"})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().ConfigMaps("default").Delete(context.Background(), "relabelled", metav1.DeleteOptions{})
	})

	e := runEngine(t, st, newKubeClusters(h))
	waitFor(t, e, owner, "stamped after the restart", settledIn(rsyncv1.State_STATE_APPLIED))
	live, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, owner, live.Annotations[engine.OwnerAnnotation], "adopted: stamped with its owner")
	rb, err := cs.RbacV1().RoleBindings(ns).Get(ctx, "dev", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, owner, rb.Annotations[engine.OwnerAnnotation])

	// Another owner is refused the adopted namespace.
	_, err = e.Submit(ctx, "lc/q/other", rollout(h, namespaceWith(ns, "other"), 1))
	require.NoError(t, err)
	other := waitFor(t, e, "lc/q/other", "failed", settledIn(rsyncv1.State_STATE_FAILED))
	require.Equal(t, `Namespace "legacy" is managed by lc/p/legacy: refused`, resourceOf(other.GetClusters()[0], "Namespace", ns).GetLastError())
	cleanup(t, e, "lc/q/other")

	// The subjects the legacy manager "dcm" applied change with a re-render.
	_, err = e.Update(ctx, owner, rollout(h, []string{manifests[0], binding("bob")}, 1))
	require.NoError(t, err)
	status := waitFor(t, e, owner, "updated", generationSettled(2, rsyncv1.State_STATE_APPLIED))
	require.Empty(t, resourceOf(status.GetClusters()[0], "RoleBinding", "dev").GetLastError())
	rb, err = cs.RbacV1().RoleBindings(ns).Get(ctx, "dev", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, rb.Subjects, 1)
	require.Equal(t, "bob", rb.Subjects[0].Name, "the legacy manager's field taken over by the owner's")

	// The deleting legacy owner removed only what still shows it applied it.
	gst := waitFor(t, e, oldOwner, "deleted", settledIn(rsyncv1.State_STATE_DELETED))
	_, err = cs.CoreV1().ConfigMaps("default").Get(ctx, "kept-labels", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "deleted: %v", err)
	_, err = cs.CoreV1().ConfigMaps("default").Get(ctx, "relabelled", metav1.GetOptions{})
	require.NoError(t, err, "left on the cluster")
	require.Equal(t, `left on the cluster, not deleted: ConfigMap "default/relabelled" has no dcm.io/owner annotation and not the labels this owner applied`,
		resourceOf(gst.GetClusters()[0], "ConfigMap", "relabelled").GetLastError())

	cleanup(t, e, owner)
	_, err = cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the adopted namespace is deleted with its owner: %v", err)
}
