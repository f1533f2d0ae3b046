package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// directClusters hands the engine the harness's clusters as *engine.Kube
// itself, which can watch (kubeClusters wraps them, so the engine only
// compares periodically there).
type directClusters struct{ *kubeClusters }

func (d directClusters) Connect(ctx context.Context, provider, cluster string) (engine.Cluster, error) {
	if _, err := d.kubeClusters.Connect(ctx, provider, cluster); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.clients[provider+"/"+cluster], nil
}

func driftSet(ns string) []string {
	return []string{
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": %q}}`, ns),
		fmt.Sprintf(`{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "dev", "namespace": %q},
 "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}`, ns),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "quota", "namespace": %q},
 "spec": {"hard": {"configmaps": "10", "requests.storage": "1Gi"}}}`, ns),
	}
}

// drift by hand: the Role deleted, the quota's hard edited by another
// field manager (as kubectl edit does).
func driftByHand(t *testing.T, cs kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, cs.RbacV1().Roles(ns).Delete(ctx, "dev", metav1.DeleteOptions{}))
	q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
	require.NoError(t, err)
	q.Spec.Hard[corev1.ResourceConfigMaps] = resource.MustParse("99")
	_, err = cs.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{FieldManager: "kubectl-edit"})
	require.NoError(t, err)
}

// driftsOf is the first cluster's drift records by kind.
func driftsOf(st *rsyncv1.RolloutStatus) map[string]*rsyncv1.Drift {
	out := map[string]*rsyncv1.Drift{}
	for _, d := range st.GetClusters()[0].GetDrift() {
		out[d.GetKind()] = d
	}
	return out
}

func driftCount(t *testing.T, kind, result string) float64 {
	t.Helper()
	return counterValue(t, "dcm_rsync_drift_total", map[string]string{"kind": kind, "result": result})
}

// counterValue is the value of counter name's series with labels (all of
// them equal; others may be set), 0 when there is none.
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestDriftIsRepaired: on a real cluster, a deleted Role and a
// ResourceQuota edited by another field manager are noticed by the
// watches (the periodic compare is an hour away) and put back; the
// status lists both repairs, with the field and the manager that changed
// it, and the counter counts them.
func TestDriftIsRepaired(t *testing.T) {
	h := kubetest.ForTests(t, 1)
	cfg := testConfig
	cfg.DriftInterval = time.Hour
	e := engine.New(storetest.Open(t), directClusters{newKubeClusters(h)}, cfg, zaptest.NewLogger(t))
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	ctx := context.Background()
	const ns, owner = "drift-repair", "lc/p/drift-repair"
	cs := clientset(t, h.Clusters[0])
	_, err := e.Submit(ctx, owner, rollout(h, driftSet(ns), 0))
	require.NoError(t, err)
	waitFor(t, e, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	role, err := cs.RbacV1().Roles(ns).Get(ctx, "dev", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "true", role.Labels[engine.ManagedLabel], "stamped for the watches")
	repairedRoles, repairedQuotas := driftCount(t, "Role", "repaired"), driftCount(t, "ResourceQuota", "repaired")

	start := time.Now()
	driftByHand(t, cs, ns)
	st := waitFor(t, e, owner, "repaired", func(st *rsyncv1.RolloutStatus) bool {
		ds := driftsOf(st)
		return settledIn(rsyncv1.State_STATE_APPLIED)(st) && len(ds) == 2 && ds["Role"].GetRepaired() && ds["ResourceQuota"].GetRepaired()
	})
	t.Logf("both repaired %v after the edits", time.Since(start).Round(time.Millisecond))
	ds := driftsOf(st)
	require.True(t, ds["Role"].GetDeleted())
	require.Equal(t, ns, ds["Role"].GetNamespace())
	require.Equal(t, "dev", ds["Role"].GetName())
	require.False(t, ds["ResourceQuota"].GetDeleted())
	require.Equal(t, []string{".spec.hard.configmaps"}, ds["ResourceQuota"].GetFields())
	require.Equal(t, []string{"kubectl-edit"}, ds["ResourceQuota"].GetManagers())
	require.NotNil(t, ds["ResourceQuota"].GetTime())

	_, err = cs.RbacV1().Roles(ns).Get(ctx, "dev", metav1.GetOptions{})
	require.NoError(t, err, "the Role is back")
	q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
	require.NoError(t, err)
	hard := q.Spec.Hard[corev1.ResourceConfigMaps]
	require.Equal(t, "10", hard.String(), "the quota is back")
	require.Equal(t, repairedRoles+1, driftCount(t, "Role", "repaired"))
	require.Equal(t, repairedQuotas+1, driftCount(t, "ResourceQuota", "repaired"))
	cleanup(t, e, owner)
}

// TestDriftIsOnlyReported: with repair false the periodic compare (no
// watches here) reports the same drift and leaves the objects as changed.
func TestDriftIsOnlyReported(t *testing.T) {
	h := kubetest.ForTests(t, 1)
	cfg := testConfig
	cfg.DriftInterval = time.Second
	e := engine.New(storetest.Open(t), newKubeClusters(h), cfg, zap.NewNop())
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	ctx := context.Background()
	const ns, owner = "drift-report", "lc/p/drift-report"
	cs := clientset(t, h.Clusters[0])
	no := false
	_, err := e.SubmitGuest(ctx, owner, "", &no, rollout(h, driftSet(ns), 0))
	require.NoError(t, err)
	waitFor(t, e, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))

	driftByHand(t, cs, ns)
	st := waitFor(t, e, owner, "reported", func(st *rsyncv1.RolloutStatus) bool { return len(driftsOf(st)) == 2 })
	ds := driftsOf(st)
	require.True(t, ds["Role"].GetDeleted())
	require.False(t, ds["Role"].GetRepaired())
	require.Equal(t, []string{".spec.hard.configmaps"}, ds["ResourceQuota"].GetFields())
	require.Equal(t, []string{"kubectl-edit"}, ds["ResourceQuota"].GetManagers())
	require.False(t, ds["ResourceQuota"].GetRepaired())
	require.Equal(t, rsyncv1.State_STATE_APPLIED, st.GetState(), "nothing to do: drift is only reported")

	// Two more compares later, the objects are still as changed, and the
	// drift was recorded once.
	time.Sleep(2500 * time.Millisecond)
	_, err = cs.RbacV1().Roles(ns).Get(ctx, "dev", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the Role stays deleted")
	q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
	require.NoError(t, err)
	hard := q.Spec.Hard[corev1.ResourceConfigMaps]
	require.Equal(t, "99", hard.String(), "the quota stays edited")
	st, err = e.Status(ctx, owner)
	require.NoError(t, err)
	require.Len(t, st.GetClusters()[0].GetDrift(), 2)

	// Repair turned on by an update: the next compare repairs both.
	yes := true
	_, err = e.UpdateGuest(ctx, owner, "", &yes, rollout(h, driftSet(ns), 0))
	require.NoError(t, err)
	waitFor(t, e, owner, "repaired", func(st *rsyncv1.RolloutStatus) bool {
		n := 0
		for _, d := range st.GetClusters()[0].GetDrift() {
			if d.GetRepaired() {
				n++
			}
		}
		return settledIn(rsyncv1.State_STATE_APPLIED)(st) && n == 2
	})
	q, err = cs.CoreV1().ResourceQuotas(ns).Get(ctx, "quota", metav1.GetOptions{})
	require.NoError(t, err)
	hard = q.Spec.Hard[corev1.ResourceConfigMaps]
	require.Equal(t, "10", hard.String())
	cleanup(t, e, owner)
}
