package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

const shards = 64 // the default

// runReplica starts an engine named name on st until the test ends.
func runReplica(t *testing.T, st *store.Store, conn engine.Connector, name string, cfg engine.Config) *engine.Engine {
	t.Helper()
	cfg.Replica = name
	e := engine.New(st, conn, cfg, zap.NewNop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return e
}

// shardHolders reads which replica (by name) holds each live shard lease.
func shardHolders(t *testing.T, leases *store.Leases) map[int]string {
	t.Helper()
	list, err := leases.List(context.Background())
	require.NoError(t, err)
	out := map[int]string{}
	for _, l := range list {
		var i int
		if _, err := fmt.Sscanf(l.Name, "shard/%d", &i); err != nil || !l.Expires.After(time.Now()) {
			continue
		}
		name, _, _ := strings.Cut(l.Holder, "#")
		out[i] = name
	}
	return out
}

// waitSplit waits until every shard is held and no replica of names holds
// more than its share.
func waitSplit(t *testing.T, leases *store.Leases, names ...string) map[int]string {
	t.Helper()
	share := (shards + len(names) - 1) / len(names)
	deadline := time.Now().Add(time.Minute)
	for {
		holders := shardHolders(t, leases)
		count := map[string]int{}
		for _, n := range holders {
			count[n]++
		}
		ok := len(holders) == shards
		for _, n := range names {
			ok = ok && count[n] > 0 && count[n] <= share
		}
		if ok {
			return holders
		}
		require.True(t, time.Now().Before(deadline), "shards not split among %v: %v", names, count)
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReplicasServeTheAPI runs two replicas on one store: the shards split
// between them, a rollout submitted through one converges as seen
// through the other, an update through the other is taken up by the
// first, and each cluster's state is written under its holder's lease.
func TestReplicasServeTheAPI(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	st := storetest.Open(t)
	a := runReplica(t, st, newKubeClusters(h), "a", testConfig)
	b := runReplica(t, st, newKubeClusters(h), "b", testConfig)
	leases := store.NewLeases(st, "rsync_leases")
	holders := waitSplit(t, leases, "a", "b")

	ctx := context.Background()
	const owner, ns = "lc/p/replicas", "tenant-replicas"
	_, err := a.Submit(ctx, owner, rollout(h, configMaps(ns, 5), 0, 1, 2))
	require.NoError(t, err)
	waitFor(t, b, owner, "applied, seen through the other replica", settledIn(rsyncv1.State_STATE_APPLIED))

	_, err = b.Update(ctx, owner, rollout(h, configMaps(ns, 7), 0, 1, 2))
	require.NoError(t, err)
	now, err := a.Status(ctx, owner)
	require.NoError(t, err)
	require.Equal(t, int64(2), now.GetGeneration(), "the other replica reads the update at once, not at its next poll")
	got := waitFor(t, a, owner, "updated through the other replica", func(st *rsyncv1.RolloutStatus) bool {
		return st.GetGeneration() == 2 && settledIn(rsyncv1.State_STATE_APPLIED)(st)
	})
	require.Equal(t, int32(3*8), got.GetReady())
	for _, c := range h.Clusters {
		require.Equal(t, 7, countConfigMaps(t, c, ns), c.Name)
	}

	// Each cluster's state carries its holder's epoch.
	list, err := leases.List(ctx)
	require.NoError(t, err)
	epochs := map[string]int64{}
	for _, l := range list {
		epochs[l.Name] = l.Epoch
	}
	states := store.NewRecords(st, "rollout_clusters", "state", func() *rsyncv1.StoredClusterState { return &rsyncv1.StoredClusterState{} })
	items, err := states.Children(ctx, owner)
	require.NoError(t, err)
	require.Len(t, items, 3)
	for _, it := range items {
		i := engine.ShardOf(it.Msg.GetProvider(), it.Msg.GetCluster(), shards)
		require.Equal(t, epochs[fmt.Sprintf("shard/%03d", i)], it.Msg.GetEpoch(), "cluster %s, shard %d held by %s", it.Msg.GetCluster(), i, holders[i])
	}

	_, err = b.Delete(ctx, owner)
	require.NoError(t, err)
	waitFor(t, a, owner, "deleted", settledIn(rsyncv1.State_STATE_DELETED))
}

// TestSettledOnOneReplicaIsSettledOnAll: what one replica answers
// settled, the other answers settled at once. A replica shows its own
// clusters settled only once their states are saved, and a one-shot
// status reads the other replica's saves however recently it read them
// (core deletes a terminated logical cloud on the status of whichever
// replica it asks).
func TestSettledOnOneReplicaIsSettledOnAll(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	st := storetest.Open(t)
	replicas := map[string]*engine.Engine{
		"a": runReplica(t, st, newKubeClusters(h), "a", testConfig),
		"b": runReplica(t, st, newKubeClusters(h), "b", testConfig),
	}
	holders := waitSplit(t, store.NewLeases(st, "rsync_leases"), "a", "b")
	// x works cluster 0; y is the other replica.
	x, y := replicas["a"], replicas["b"]
	if holders[engine.ShardOf("edge", h.Clusters[0].Name, shards)] == "b" {
		x, y = y, x
	}

	ctx := context.Background()
	const owner, ns = "lc/p/settled", "tenant-settled"
	both := func(what string, ok func(*rsyncv1.RolloutStatus) bool) {
		t.Helper()
		for name, e := range map[string]*engine.Engine{"the replica working cluster 0": x, "the other": y} {
			now, err := e.Status(ctx, owner)
			require.NoError(t, err)
			require.True(t, ok(now), "%s, %s: %v settled %v, %d of %d ready", what, name, now.GetState(), now.GetSettled(), now.GetReady(), now.GetTotal())
		}
	}
	for i, want := range []rsyncv1.State{rsyncv1.State_STATE_APPLIED, rsyncv1.State_STATE_APPLIED, rsyncv1.State_STATE_DELETED} {
		release := x.HoldSaves(t)
		var err error
		switch i {
		case 0:
			_, err = y.Submit(ctx, owner, rollout(h, configMaps(ns, 5), 0, 1, 2))
		case 1:
			_, err = y.Update(ctx, owner, rollout(h, configMaps(ns, 6), 0, 1, 2))
		default:
			_, err = y.Delete(ctx, owner)
		}
		require.NoError(t, err)
		what := fmt.Sprintf("step %d (%v)", i, want)
		waitFor(t, x, owner, what+": done on the clusters", func(st *rsyncv1.RolloutStatus) bool {
			return st.GetGeneration() == int64(i+1) && st.GetReady() == st.GetTotal() && st.GetState() != rsyncv1.State_STATE_RETRYING
		})
		both(what+", unsaved", func(st *rsyncv1.RolloutStatus) bool { return !st.GetSettled() })
		release()
		var last *rsyncv1.RolloutStatus
		require.NoError(t, x.Watch(ctx, owner, true, func(st *rsyncv1.RolloutStatus) error { last = st; return nil }))
		require.True(t, settledIn(want)(last), "%s, watched: %v settled %v", what, last.GetState(), last.GetSettled())
		both(what+", at once", settledIn(want))
	}
}

// TestKilledReplicaIsTakenOver runs three replicas as processes on one
// store, kills the one working the most clusters with SIGKILL in the
// middle of a rollout (150 ConfigMaps and a CertificateSigningRequest per
// cluster), and checks that the others take its shards over within 15 s
// with the default lease, that the rollout converges, that no object lost
// a field and that each CSR was approved once.
func TestKilledReplicaIsTakenOver(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	st := storetest.Open(t)
	const owner, ns, n = "lc/p/takeover", "tenant-takeover", 150
	per := n + 2 // the Namespace, the ConfigMaps, the CSR
	trigger := filepath.Join(t.TempDir(), "submit")
	names := []string{"r1", "r2", "r3"}
	kids := map[string]*child{}
	for i, name := range names {
		submit := 0
		if i == 0 {
			submit = n
		}
		kids[name] = startChild(t, st, h, submit, "DCM_CHILD_REPLICA="+name, "DCM_CHILD_OWNER="+owner,
			"DCM_CHILD_NS="+ns, "DCM_CHILD_CSR=1", "DCM_CHILD_TRIGGER="+trigger)
	}
	leases := store.NewLeases(st, "rsync_leases")
	holders := waitSplit(t, leases, names...)

	// The victim works the most clusters (at least one).
	works := map[string][]*kubetest.Cluster{}
	victim := ""
	for _, c := range h.Clusters {
		r := holders[engine.ShardOf("edge", c.Name, shards)]
		works[r] = append(works[r], c)
		if victim == "" || len(works[r]) > len(works[victim]) {
			victim = r
		}
	}
	require.NoError(t, os.WriteFile(trigger, nil, 0o600))
	deadline := time.Now().Add(time.Minute)
	for {
		on := 0
		for _, c := range works[victim] {
			on += countConfigMaps(t, c, ns)
		}
		if on >= len(works[victim])*n/3 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the victim %s made no progress", victim)
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, kids[victim].cmd.Process.Signal(syscall.SIGKILL))
	_ = kids[victim].cmd.Wait()
	killed := time.Now()
	applied, _ := settledStore(t, st, owner)
	require.Less(t, applied, 3*per, "killed mid-rollout")
	t.Logf("killed %s (working %d clusters) with %d of %d resources stored as applied", victim, len(works[victim]), applied, 3*per)

	var took time.Duration
	for {
		now := shardHolders(t, leases)
		left := 0
		for i, r := range holders {
			if r == victim && (now[i] == "" || now[i] == victim) {
				left++
			}
		}
		if left == 0 {
			took = time.Since(killed)
			break
		}
		require.Less(t, time.Since(killed), 20*time.Second, "%d of the victim's shards not taken over", left)
		time.Sleep(50 * time.Millisecond)
	}
	require.Less(t, took, 15*time.Second, "taken over within 15 s")
	deadline = time.Now().Add(2 * time.Minute)
	for {
		done, all := storedApplied(t, st, owner)
		if done == 3*per && all == 3*per {
			break
		}
		require.True(t, time.Now().Before(deadline), "not converged after the takeover (%d of %d stored as applied)", done, all)
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("shards taken over %v after the kill; converged %v after the kill", took.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))

	ctx := context.Background()
	for _, c := range h.Clusters {
		cs := clientset(t, c)
		list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		seen := 0
		for _, cm := range list.Items {
			var i int
			if _, err := fmt.Sscanf(cm.Name, "cm-%d", &i); err != nil {
				continue
			}
			seen++
			require.Equal(t, fmt.Sprint(i), cm.Data["i"], "%s %s keeps its field", c.Name, cm.Name)
			require.Equal(t, owner, cm.Annotations[engine.OwnerAnnotation], "%s %s", c.Name, cm.Name)
		}
		require.Equal(t, n, seen, c.Name)
		csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, ns+"-user", metav1.GetOptions{})
		require.NoError(t, err)
		approvals := 0
		for _, cond := range csr.Status.Conditions {
			require.NotEqual(t, certificatesv1.CertificateDenied, cond.Type)
			if cond.Type == certificatesv1.CertificateApproved {
				approvals++
			}
		}
		require.Equal(t, 1, approvals, "%s: the CSR is approved once", c.Name)
		require.NotEmpty(t, csr.Status.Certificate, "%s: and issued", c.Name)
	}

	for _, name := range names {
		if name != victim {
			require.NoError(t, kids[name].cmd.Process.Signal(syscall.SIGTERM))
			_ = kids[name].cmd.Wait()
		}
	}
	cleanup(t, runEngine(t, st, newKubeClusters(h)), owner)
}

// TestDeletedRolloutsArePurged deletes a rollout through one of two
// replicas: once its deletion has settled for PurgeAfter, its record and
// cluster states leave the store, both replicas answer NotFound, and the
// owner can submit it anew.
func TestDeletedRolloutsArePurged(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	st := storetest.Open(t)
	cfg := testConfig
	cfg.PurgeAfter, cfg.Poll = 300*time.Millisecond, 100*time.Millisecond
	a := runReplica(t, st, newKubeClusters(h), "a", cfg)
	b := runReplica(t, st, newKubeClusters(h), "b", cfg)
	waitSplit(t, store.NewLeases(st, "rsync_leases"), "a", "b")
	ctx := context.Background()
	const owner, ns = "lc/p/purged", "tenant-purged"
	_, err := a.Submit(ctx, owner, rollout(h, configMaps(ns, 2), 0, 1, 2))
	require.NoError(t, err)
	waitFor(t, b, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	_, err = b.Delete(ctx, owner)
	require.NoError(t, err)
	waitFor(t, a, owner, "deleted", settledIn(rsyncv1.State_STATE_DELETED))

	rollouts := store.NewRecords(st, "rollouts", "rollout", func() *rsyncv1.StoredRollout { return &rsyncv1.StoredRollout{} })
	states := store.NewRecords(st, "rollout_clusters", "state", func() *rsyncv1.StoredClusterState { return &rsyncv1.StoredClusterState{} })
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := rollouts.Get(ctx, owner)
		left, lerr := states.Children(ctx, owner)
		require.NoError(t, lerr)
		if errs.Code(err) == codes.NotFound && len(left) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "not purged: %v, %d states", err, len(left))
		time.Sleep(50 * time.Millisecond)
	}
	for _, e := range []*engine.Engine{a, b} {
		require.Eventually(t, func() bool {
			_, err := e.Status(ctx, owner)
			return errs.Code(err) == codes.NotFound
		}, 10*time.Second, 50*time.Millisecond, "both replicas forget it")
	}

	gen, err := b.Submit(ctx, owner, rollout(h, configMaps(ns, 1), 0))
	require.NoError(t, err)
	require.Equal(t, int64(1), gen, "submitted anew")
	waitFor(t, a, owner, "applied anew", settledIn(rsyncv1.State_STATE_APPLIED))
	_, err = a.Delete(ctx, owner)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := b.Status(ctx, owner)
		return errs.Code(err) == codes.NotFound
	}, 30*time.Second, 50*time.Millisecond, "deleted and purged again")
	require.Zero(t, countConfigMaps(t, h.Clusters[0], ns))
}
