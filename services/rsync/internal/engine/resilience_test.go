package engine_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// configMaps is a Namespace and n ConfigMaps in it.
func configMaps(ns string, n int) []string {
	out := []string{fmt.Sprintf(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": %q, "labels": {"dcm.io/test": %q}}}`, ns, ns)}
	for i := range n {
		out = append(out, fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-%03d", "namespace": %q}, "data": {"i": "%d"}}`, i, ns, i))
	}
	return out
}

// countConfigMaps counts the ConfigMaps named cm-* in ns on c.
func countConfigMaps(t *testing.T, c *kubetest.Cluster, ns string) int {
	t.Helper()
	list, err := clientset(t, c).CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return 0
	}
	n := 0
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, "cm-") {
			n++
		}
	}
	return n
}

// cleanup deletes a rollout and waits until it is gone.
func cleanup(t *testing.T, e *engine.Engine, owner string) {
	t.Helper()
	_, err := e.Delete(context.Background(), owner)
	require.NoError(t, err)
	waitFor(t, e, owner, "deleted", settledIn(rsyncv1.State_STATE_DELETED))
}

func TestBadManifestFailsWithoutBlocking(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	e := runEngine(t, storetest.Open(t), newKubeClusters(h))
	const ns = "tenant-bad"
	good := configMaps(ns, 2)
	bad := fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name", "namespace": %q}}`, ns)
	clusters := rollout(h, good, 0, 1)
	// On cluster-1 the bad one comes before a good one.
	clusters[0].Resources = append(clusters[0].Resources[:1], append([]*rsyncv1.Resource{{Manifest: bad}}, clusters[0].Resources[1:]...)...)
	_, err := e.Submit(context.Background(), "lc/p/bad", clusters)
	require.NoError(t, err)

	st := waitFor(t, e, "lc/p/bad", "failed", settledIn(rsyncv1.State_STATE_FAILED))
	c1, c2 := st.GetClusters()[0], st.GetClusters()[1]
	require.Equal(t, rsyncv1.State_STATE_FAILED, c1.GetState())
	require.Equal(t, rsyncv1.State_STATE_APPLIED, c2.GetState(), "the other cluster is not blocked")
	r := c1.GetResources()[1]
	require.Equal(t, "Bad_Name", r.GetName())
	require.Equal(t, rsyncv1.State_STATE_FAILED, r.GetState())
	require.Contains(t, r.GetLastError(), `metadata.name: Invalid value: "Bad_Name"`, "the API server's message")
	require.Equal(t, r.GetLastError(), c1.GetLastError())
	require.Equal(t, 2, countConfigMaps(t, h.Clusters[0], ns), "what follows the bad manifest is applied")
	require.Equal(t, 2, countConfigMaps(t, h.Clusters[1], ns))
	require.EqualValues(t, 6, st.GetReady())
	require.EqualValues(t, 7, st.GetTotal())
	cleanup(t, e, "lc/p/bad")
}

func TestClusterDownMidApplyConverges(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	e := runEngine(t, storetest.Open(t), newKubeClusters(h))
	const ns = "tenant-down"
	set := configMaps(ns, 150)
	down := h.Clusters[1]
	_, err := e.Submit(context.Background(), "lc/p/down", rollout(h, set, 0, 1, 2))
	require.NoError(t, err)
	// Stop cluster-2 once it has some of the set.
	deadline := time.Now().Add(time.Minute)
	for countConfigMaps(t, down, ns) == 0 {
		require.True(t, time.Now().Before(deadline), "cluster-2 never got part of the set")
		time.Sleep(10 * time.Millisecond)
	}
	down.StopAPIServer()
	st0, err := e.Status(context.Background(), "lc/p/down")
	require.NoError(t, err)
	require.Less(t, st0.GetClusters()[1].GetReady(), int32(len(set)), "stopped mid-apply")
	restarted := false
	defer func() {
		if !restarted {
			require.NoError(t, down.StartAPIServer(context.Background()))
		}
	}()
	st := waitFor(t, e, "lc/p/down", "retrying on cluster-2", func(st *rsyncv1.RolloutStatus) bool {
		c := st.GetClusters()[1]
		return c.GetState() == rsyncv1.State_STATE_RETRYING && st.GetClusters()[0].GetState() == rsyncv1.State_STATE_APPLIED &&
			st.GetClusters()[2].GetState() == rsyncv1.State_STATE_APPLIED && retrying(c).GetAttempts() >= 3
	})
	r := retrying(st.GetClusters()[1])
	require.Contains(t, r.GetLastError(), "connection refused")
	require.True(t, r.GetNextRetry().AsTime().After(r.GetUpdated().AsTime()), "a next retry is scheduled")
	require.Equal(t, rsyncv1.State_STATE_RETRYING, st.GetState())
	require.False(t, st.GetSettled())
	unsettled, inRetry := e.Gauges()
	require.EqualValues(t, 1, testutil.ToFloat64(unsettled), "dcm_rsync_unsettled_rollouts")
	require.EqualValues(t, 1, testutil.ToFloat64(inRetry), "dcm_rsync_clusters_in_retry")

	require.NoError(t, down.StartAPIServer(context.Background()))
	restarted = true
	waitFor(t, e, "lc/p/down", "applied after cluster-2 came back", settledIn(rsyncv1.State_STATE_APPLIED))
	waitGauge(t, "dcm_rsync_unsettled_rollouts", unsettled, 0)
	waitGauge(t, "dcm_rsync_clusters_in_retry", inRetry, 0)
	require.Equal(t, 150, countConfigMaps(t, down, ns))
	// The namespace controller of a cluster whose API server restarted may
	// back off (up to a minute) before it finalizes the Namespace.
	_, err = e.Delete(context.Background(), "lc/p/down")
	require.NoError(t, err)
	waitForWithin(t, e, "lc/p/down", "deleted", 3*time.Minute, settledIn(rsyncv1.State_STATE_DELETED))
}

func retrying(c *rsyncv1.RolloutClusterStatus) *rsyncv1.ResourceStatus {
	for _, r := range c.GetResources() {
		if r.GetState() == rsyncv1.State_STATE_RETRYING {
			return r
		}
	}
	return &rsyncv1.ResourceStatus{}
}

func TestStopHaltsRetries(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	conn := newKubeClusters(h)
	e := runEngine(t, storetest.Open(t), conn)
	const ns = "tenant-stop"
	// A ConfigMap in a namespace nobody creates retries forever.
	_, err := e.Submit(context.Background(), "lc/p/stop", rollout(h, configMaps(ns, 1)[1:], 0))
	require.NoError(t, err)
	waitFor(t, e, "lc/p/stop", "retrying", func(st *rsyncv1.RolloutStatus) bool {
		return st.GetState() == rsyncv1.State_STATE_RETRYING && retrying(st.GetClusters()[0]).GetAttempts() >= 2
	})
	require.NoError(t, e.Stop(context.Background(), "lc/p/stop"))
	st := waitFor(t, e, "lc/p/stop", "stopped", settledIn(rsyncv1.State_STATE_STOPPED))
	require.True(t, st.GetStopped())
	before := conn.totalApplies()
	// No new attempts once stopped: the retry delay is at most a second.
	time.Sleep(2 * time.Second)
	require.Equal(t, before, conn.totalApplies(), "a stopped rollout is not retried")
	// An update resumes it; with the namespace it converges.
	_, err = e.Update(context.Background(), "lc/p/stop", rollout(h, configMaps(ns, 1), 0))
	require.NoError(t, err)
	waitFor(t, e, "lc/p/stop", "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	cleanup(t, e, "lc/p/stop")
}

// The restart test runs the engine in child processes (this test binary
// again) on the parent's store, and kills the first with SIGKILL.
const childEnv = "DCM_ENGINE_TEST_CHILD"

// runChild runs an engine until SIGTERM, then prints its Apply count. With
// DCM_CHILD_SUBMIT set it first submits that many ConfigMaps to every
// cluster.
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	st, err := store.Open(store.Config{URI: os.Getenv("DCM_CHILD_URI"), Database: os.Getenv("DCM_CHILD_DB")}, zap.NewNop())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	conn := &kubeClusters{configs: map[string][]byte{}, clients: map[string]*engine.Kube{}, applies: map[string]int{}}
	var clusters []*rsyncv1.ClusterResources
	n, _ := strconv.Atoi(os.Getenv("DCM_CHILD_SUBMIT"))
	for _, path := range strings.Split(os.Getenv("DCM_CHILD_KUBECONFIGS"), ",") {
		kc, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		name := strings.TrimSuffix(filepath.Base(path), ".kubeconfig")
		conn.configs["edge/"+name] = kc
		cr := &rsyncv1.ClusterResources{Provider: "edge", Cluster: name}
		for _, m := range childManifests(n) {
			cr.Resources = append(cr.Resources, &rsyncv1.Resource{Manifest: m})
		}
		clusters = append(clusters, cr)
	}
	cfg := testConfig
	cfg.Replica = os.Getenv("DCM_CHILD_REPLICA")
	e := engine.New(st, conn, cfg, zap.NewNop())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	if trigger := os.Getenv("DCM_CHILD_TRIGGER"); trigger != "" {
		fmt.Println("ready")
		for {
			if _, err := os.Stat(trigger); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if n > 0 {
		if _, err := e.Submit(ctx, childOwner(), clusters); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if os.Getenv("DCM_CHILD_TRIGGER") == "" {
		fmt.Println("ready")
	}
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("applies %d\n", conn.totalApplies())
	return 0
}

// childOwner is the child's rollout: DCM_CHILD_OWNER, else lc/p/restart.
func childOwner() string {
	if o := os.Getenv("DCM_CHILD_OWNER"); o != "" {
		return o
	}
	return "lc/p/restart"
}

// childManifests is what the child submits to each cluster: n ConfigMaps
// in DCM_CHILD_NS (else tenant-restart), and with DCM_CHILD_CSR a
// CertificateSigningRequest that rsync approves.
func childManifests(n int) []string {
	ns := os.Getenv("DCM_CHILD_NS")
	if ns == "" {
		ns = "tenant-restart"
	}
	out := configMaps(ns, n)
	if os.Getenv("DCM_CHILD_CSR") != "" {
		csr, _, err := kube.NewCSR(ns+"-user", ns)
		if err != nil {
			panic(err)
		}
		out = append(out, kube.CSRManifest(ns+"-user", csr, nil))
	}
	return out
}

// child is a running child engine.
type child struct {
	cmd *exec.Cmd
	out *bufio.Scanner
}

func startChild(t *testing.T, st *store.Store, h *kubetest.Harness, submit int, env ...string) *child {
	t.Helper()
	var paths []string
	for _, c := range h.Clusters {
		paths = append(paths, c.KubeconfigPath)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "DCM_CHILD_URI="+st.ClientURI(), "DCM_CHILD_DB="+st.Database().Name(),
		"DCM_CHILD_KUBECONFIGS="+strings.Join(paths, ","), "DCM_CHILD_SUBMIT="+strconv.Itoa(submit))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	require.True(t, c.out.Scan(), "child engine did not start")
	require.Equal(t, "ready", c.out.Text())
	return c
}

// settledStore is storedApplied once a killed child's last writes, which
// the store may still be processing, have landed: two reads agree.
func settledStore(t *testing.T, st *store.Store, owner string) (applied, total int) {
	t.Helper()
	applied, total = storedApplied(t, st, owner)
	for {
		time.Sleep(300 * time.Millisecond)
		a, n := storedApplied(t, st, owner)
		if a == applied && n == total {
			return applied, total
		}
		applied, total = a, n
	}
}

// storedApplied counts the resources the store holds as applied.
func storedApplied(t *testing.T, st *store.Store, owner string) (applied, total int) {
	t.Helper()
	applied, total, err := storedAppliedIn(st, owner)
	require.NoError(t, err)
	return applied, total
}

// storedAppliedIn is storedApplied for a store that may not answer.
func storedAppliedIn(st *store.Store, owner string) (applied, total int, err error) {
	states := store.NewRecords(st, "rollout_clusters", "state", func() *rsyncv1.StoredClusterState { return &rsyncv1.StoredClusterState{} })
	items, err := states.Children(context.Background(), owner)
	if err != nil {
		return 0, 0, err
	}
	// A cluster's newest save counts: a writer killed between inserting a
	// save and deleting the previous one leaves both (docs/rsync.md,
	// "Persistence").
	newest := map[string]store.Item[*rsyncv1.StoredClusterState]{}
	seqOf := func(id string) int {
		_, s, _ := strings.Cut(id, "#")
		n, _ := strconv.Atoi(s)
		return n
	}
	for _, it := range items {
		key, _, _ := strings.Cut(it.ID, "#")
		if cur, ok := newest[key]; !ok || seqOf(cur.ID) < seqOf(it.ID) {
			newest[key] = it
		}
	}
	for _, it := range newest {
		for _, r := range it.Msg.GetResources() {
			total++
			if r.GetState() == rsyncv1.State_STATE_APPLIED {
				applied++
			}
		}
	}
	return applied, total, nil
}

func TestKilledMidApplyResumesWithoutLostOrRepeatedWork(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	st := storetest.Open(t)
	const ns, n = "tenant-restart", 200
	total := 3 * (n + 1)
	count := func() (sum int) {
		for _, c := range h.Clusters {
			sum += countConfigMaps(t, c, ns)
		}
		return sum
	}

	// One replica name: the restarted engine takes its shards back at once,
	// as a restarted pod does (the takeover by another replica is
	// TestKilledReplicaIsTakenOver's).
	first := startChild(t, st, h, n, "DCM_CHILD_REPLICA=restart")
	deadline := time.Now().Add(time.Minute)
	for {
		applied, _ := storedApplied(t, st, "lc/p/restart")
		if applied > 0 && count() >= total/3 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no progress stored")
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	_ = first.cmd.Wait()
	applied, stored := settledStore(t, st, "lc/p/restart")
	onClusters := count()
	require.Less(t, applied, total, "killed mid-apply")
	t.Logf("killed with %d of %d objects on the clusters, %d recorded as applied", onClusters, total, applied)

	second := startChild(t, st, h, 0, "DCM_CHILD_REPLICA=restart")
	deadline = time.Now().Add(2 * time.Minute)
	for {
		done, all := storedApplied(t, st, "lc/p/restart")
		if done == total && all == total {
			break
		}
		require.True(t, time.Now().Before(deadline), "the restarted engine did not converge (%d of %d stored as applied)", done, all)
		time.Sleep(100 * time.Millisecond)
	}
	require.Equal(t, 3*n, count(), "nothing lost")
	require.NoError(t, second.cmd.Process.Signal(syscall.SIGTERM))
	require.True(t, second.out.Scan())
	var applies int
	_, err := fmt.Sscanf(second.out.Text(), "applies %d", &applies)
	require.NoError(t, err, second.out.Text())
	require.Equal(t, total-applied, applies, "the restarted engine applies exactly what was not recorded as applied (stored: %d entries)", stored)

	// Clean up with an engine in this process.
	e := runEngine(t, st, newKubeClusters(h))
	cleanup(t, e, "lc/p/restart")
	for _, c := range h.Clusters {
		_, err := clientset(t, c).CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err))
	}
}

func TestConflictsAreReportedUnlessForced(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	ctx := context.Background()
	const ns, owner = "tenant-conflict", "lc/p/conflict"
	cs := clientset(t, h.Clusters[0])
	mine := func(v string) []*rsyncv1.ClusterResources {
		return rollout(h, []string{
			fmt.Sprintf(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": %q}}`, ns),
			fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned", "namespace": %q}, "data": {"k": %q}}`, ns, v),
		}, 0)
	}
	e := runEngine(t, storetest.Open(t), newKubeClusters(h))
	_, err := e.Submit(ctx, owner, mine("ours"))
	require.NoError(t, err)
	waitFor(t, e, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	// Another field manager takes the field over.
	_, err = cs.CoreV1().ConfigMaps(ns).Apply(ctx, corev1ac.ConfigMap("owned", ns).WithData(map[string]string{"k": "theirs"}),
		metav1.ApplyOptions{FieldManager: "someone-else", Force: true})
	require.NoError(t, err)

	_, err = e.Update(ctx, owner, mine("ours again"))
	require.NoError(t, err)
	st := waitFor(t, e, owner, "failed", func(st *rsyncv1.RolloutStatus) bool {
		return st.GetGeneration() == 2 && settledIn(rsyncv1.State_STATE_FAILED)(st)
	})
	require.Contains(t, st.GetClusters()[0].GetLastError(), `conflict with "someone-else"`)
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "owned", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "theirs", cm.Data["k"], "not forced")

	// With DCM_RSYNC_FORCE_CONFLICTS the owner's object is taken back (an
	// engine on another store: its annotation says whose it is).
	cfg := testConfig
	cfg.ForceConflicts = true
	forced := engine.New(storetest.Open(t), newKubeClusters(h), cfg, zap.NewNop())
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- forced.Run(runCtx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	_, err = forced.Submit(ctx, owner, mine("ours again"))
	require.NoError(t, err)
	waitFor(t, forced, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	cm, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, "owned", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "ours again", cm.Data["k"], "forced")
	cleanup(t, forced, owner)
	cleanup(t, e, owner)
}
