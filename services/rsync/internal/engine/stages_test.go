package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// refusing is a simulated cluster whose API server refuses (a terminal
// error, as an admission webhook's denial) every object whose data holds
// the value refuse.
type refusing struct {
	*engine.Simulated
	refuse string
}

func (r *refusing) Apply(ctx context.Context, obj *unstructured.Unstructured, manager string, force bool) (*unstructured.Unstructured, error) {
	if v, _, _ := unstructured.NestedString(obj.Object, "data", "v"); v == r.refuse && r.refuse != "" {
		return nil, engine.Terminal(errors.New(`admission webhook "deny.example.com" denied the request`))
	}
	return r.Simulated.Apply(ctx, obj, manager, force)
}

// stagedFleet is six simulated clusters sim/c0..c5, sim/c2 refusing "v2".
func stagedFleet() (engine.Clusters[engine.Cluster], map[string]*refusing) {
	conn, sims := engine.Clusters[engine.Cluster]{}, map[string]*refusing{}
	for i := range 6 {
		c := &refusing{Simulated: &engine.Simulated{}}
		if i == 2 {
			c.refuse = "v2"
		}
		key := fmt.Sprintf("sim/c%d", i)
		conn[key], sims[key] = c, c
	}
	return conn, sims
}

// stagedEngine runs an engine over stagedFleet until the test ends.
func stagedEngine(t *testing.T) (*engine.Engine, map[string]*refusing) {
	t.Helper()
	conn, sims := stagedFleet()
	return runEngine(t, storetest.Open(t), conn), sims
}

// versioned is a ConfigMap "app" in namespace "staged" with data v on
// each of the six clusters, in order.
func versioned(v string) []*rsyncv1.ClusterResources {
	ns := `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "staged"}}`
	cm := fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app", "namespace": "staged"}, "data": {"v": %q}}`, v)
	var out []*rsyncv1.ClusterResources
	for i := range 6 {
		out = append(out, &rsyncv1.ClusterResources{Provider: "sim", Cluster: fmt.Sprintf("c%d", i),
			Resources: []*rsyncv1.Resource{{Manifest: ns}, {Manifest: cm}}})
	}
	return out
}

// dataOn is the ConfigMap's data on a cluster ("" if it is not there).
func dataOn(t *testing.T, c *refusing) string {
	t.Helper()
	u, err := c.Get(context.Background(), schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "staged", "app")
	if err != nil {
		return ""
	}
	v, _, _ := unstructured.NestedString(u.Object, "data", "v")
	return v
}

// clusterGen is the generation a cluster of st last finished.
func clusterGen(st *rsyncv1.RolloutStatus, key string) int64 {
	for _, c := range st.GetClusters() {
		if c.GetProvider()+"/"+c.GetCluster() == key {
			return c.GetGeneration()
		}
	}
	return -1
}

func paused(st *rsyncv1.RolloutStatus) bool {
	return st.GetSettled() && st.GetProgress().GetPaused()
}

var twoAtATime = &rsyncv1.RolloutStrategy{Progressive: true, MaxConcurrency: 2, MaxFailures: 0, Soak: durationpb.New(0)}

// pausedAtV2 submits v1 to the six clusters, updates to v2 two clusters at
// a time, and waits for the update to pause at sim/c2's failure.
func pausedAtV2(t *testing.T, e *engine.Engine, owner string) *rsyncv1.RolloutStatus {
	t.Helper()
	ctx := context.Background()
	_, err := e.SubmitStaged(ctx, owner, "", nil, twoAtATime, versioned("v1"))
	require.NoError(t, err)
	st := waitFor(t, e, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	require.EqualValues(t, 3, st.GetProgress().GetWave(), "v1 went out in three waves of two")
	gen, err := e.UpdateStaged(ctx, owner, "", nil, twoAtATime, versioned("v2"))
	require.NoError(t, err)
	require.EqualValues(t, 2, gen)
	return waitFor(t, e, owner, "paused", paused)
}

// checkPaused checks a rollout paused at sim/c2: waves 1 (c0, c1) and 2
// (c2, c3) got v2, c2 failed it, c4 and c5 were never reached.
func checkPaused(t *testing.T, st *rsyncv1.RolloutStatus, sims map[string]*refusing) {
	t.Helper()
	p := st.GetProgress()
	require.Equal(t, []string{"sim/c2"}, p.GetFailed())
	require.EqualValues(t, 2, p.GetWave())
	require.EqualValues(t, 4, p.GetAdmitted())
	require.EqualValues(t, 6, p.GetTotal())
	require.True(t, p.GetRollbackAvailable())
	for _, k := range []string{"sim/c0", "sim/c1", "sim/c3"} {
		require.Equal(t, "v2", dataOn(t, sims[k]), k)
		require.EqualValues(t, 2, clusterGen(st, k), k)
	}
	require.Equal(t, "v1", dataOn(t, sims["sim/c2"]), "c2 refused v2")
	for _, k := range []string{"sim/c4", "sim/c5"} {
		require.Equal(t, "v1", dataOn(t, sims[k]), "%s was not reached: it keeps v1", k)
		require.EqualValues(t, 1, clusterGen(st, k), "%s shows its previous generation", k)
	}
	for _, c := range st.GetClusters() {
		if c.GetCluster() == "c2" {
			require.Equal(t, rsyncv1.State_STATE_FAILED, c.GetState())
			require.Contains(t, c.GetLastError(), "denied the request")
		}
	}
}

func TestProgressiveUpdatePausesAndRollsBack(t *testing.T) {
	t.Parallel()
	e, sims := stagedEngine(t)
	ctx := context.Background()
	const owner = "lc/p/staged"
	st := pausedAtV2(t, e, owner)
	checkPaused(t, st, sims)

	require.ErrorContains(t, e.Resume(ctx, "lc/p/nothing"), "not found")
	gen, err := e.Rollback(ctx, owner)
	require.NoError(t, err)
	require.EqualValues(t, 3, gen)
	st = waitFor(t, e, owner, "rolled back", func(st *rsyncv1.RolloutStatus) bool {
		return settledIn(rsyncv1.State_STATE_APPLIED)(st) && st.GetGeneration() == 3
	})
	for k, c := range sims {
		require.Equal(t, "v1", dataOn(t, c), k)
	}
	for _, k := range []string{"sim/c0", "sim/c1", "sim/c2", "sim/c3"} {
		require.EqualValues(t, 3, clusterGen(st, k), "%s was reached by v2: v1 is applied again", k)
	}
	require.False(t, st.GetProgress().GetRollbackAvailable(), "a rollback keeps no previous generation")
	_, err = e.Rollback(ctx, owner)
	require.Equal(t, errs.ReasonWrongState, errs.ReasonOf(errs.ToStatus(err)), "%v", err)
	require.Equal(t, errs.ReasonWrongState, errs.ReasonOf(errs.ToStatus(e.Resume(ctx, owner))), "not paused")
}

func TestProgressiveResumeForgivesFailures(t *testing.T) {
	t.Parallel()
	e, sims := stagedEngine(t)
	const owner = "lc/p/resumed"
	pausedAtV2(t, e, owner)
	require.NoError(t, e.Resume(context.Background(), owner))
	st := waitFor(t, e, owner, "settled after the last wave", func(st *rsyncv1.RolloutStatus) bool {
		return st.GetSettled() && st.GetProgress().GetAdmitted() == 6
	})
	require.Equal(t, rsyncv1.State_STATE_FAILED, st.GetState(), "c2 still fails v2")
	require.False(t, st.GetProgress().GetPaused())
	require.Equal(t, []string{"sim/c2"}, st.GetProgress().GetForgiven())
	for _, k := range []string{"sim/c4", "sim/c5"} {
		require.Equal(t, "v2", dataOn(t, sims[k]), k)
	}
}

func TestAllAtOnceIsTheDefault(t *testing.T) {
	t.Parallel()
	e, sims := stagedEngine(t)
	ctx := context.Background()
	const owner = "lc/p/all"
	_, err := e.Submit(ctx, owner, versioned("v1"))
	require.NoError(t, err)
	waitFor(t, e, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	_, err = e.Update(ctx, owner, versioned("v2"))
	require.NoError(t, err)
	st := waitFor(t, e, owner, "failed", settledIn(rsyncv1.State_STATE_FAILED))
	require.Nil(t, st.GetProgress())
	for _, k := range []string{"sim/c0", "sim/c1", "sim/c3", "sim/c4", "sim/c5"} {
		require.Equal(t, "v2", dataOn(t, sims[k]), k)
	}
	_, err = e.Rollback(ctx, owner)
	require.Equal(t, errs.ReasonWrongState, errs.ReasonOf(errs.ToStatus(err)), "%v", err)
}

func TestStrategyRefused(t *testing.T) {
	t.Parallel()
	e, _ := stagedEngine(t)
	_, err := e.SubmitStaged(context.Background(), "lc/p/bad", "", nil, &rsyncv1.RolloutStrategy{Progressive: true}, versioned("v1"))
	require.Equal(t, "strategy.max_concurrency", errs.FieldOf(errs.ToStatus(err)), "%v", err)
	_, err = e.SubmitStaged(context.Background(), "lc/p/bad", "", nil,
		&rsyncv1.RolloutStrategy{Progressive: true, MaxConcurrency: 1, Soak: durationpb.New(-1)}, versioned("v1"))
	require.Equal(t, "strategy.soak", errs.FieldOf(errs.ToStatus(err)), "%v", err)
	_, err = e.Status(context.Background(), "lc/p/bad")
	require.Equal(t, "NotFound", errs.Code(err).String(), "nothing stored")
}

// A paused rollout stays paused across a takeover: two replicas share the
// store (and the clusters); once the first stops, the second holds every
// shard, neither reaches the clusters held back nor forgets the pause, and,
// resumed there, finishes the waves.
func TestPausedRolloutSurvivesTakeover(t *testing.T) {
	t.Parallel()
	conn, sims := stagedFleet()
	st := storetest.Open(t)
	cfg := testConfig
	const owner = "lc/p/takeover"
	first, stopFirst := startNamed(t, st, conn, "first", cfg)
	second := runReplica(t, st, conn, "second", cfg)
	pausedAtV2(t, first, owner)
	checkPaused(t, waitFor(t, second, owner, "paused as the second replica sees it", paused), sims)
	stopFirst()

	status := waitFor(t, second, owner, "paused on the second replica", paused)
	checkPaused(t, status, sims)
	require.NoError(t, second.Resume(context.Background(), owner))
	waitFor(t, second, owner, "settled after the last wave", func(st *rsyncv1.RolloutStatus) bool {
		return st.GetSettled() && st.GetProgress().GetAdmitted() == 6
	})
	for _, k := range []string{"sim/c4", "sim/c5"} {
		require.Equal(t, "v2", dataOn(t, sims[k]), k)
	}
}

// An update that changes nothing on a cluster still settles its wave: the
// waves of an unchanged desired state all pass.
func TestProgressiveUnchangedClustersSettleTheirWave(t *testing.T) {
	t.Parallel()
	e, _ := stagedEngine(t)
	ctx := context.Background()
	const owner = "lc/p/same"
	_, err := e.SubmitStaged(ctx, owner, "", nil, twoAtATime, versioned("v1"))
	require.NoError(t, err)
	waitFor(t, e, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	_, err = e.UpdateStaged(ctx, owner, "", nil, twoAtATime, versioned("v1"))
	require.NoError(t, err)
	st := waitFor(t, e, owner, "applied at generation 2", func(st *rsyncv1.RolloutStatus) bool {
		return settledIn(rsyncv1.State_STATE_APPLIED)(st) && st.GetGeneration() == 2
	})
	require.EqualValues(t, 6, st.GetProgress().GetAdmitted())
	require.EqualValues(t, 3, st.GetProgress().GetWave())
}

// The next wave waits for the soak time after the previous one settled.
func TestProgressiveSoakHoldsTheNextWave(t *testing.T) {
	t.Parallel()
	e, sims := stagedEngine(t)
	const owner = "lc/p/soak"
	slow := &rsyncv1.RolloutStrategy{Progressive: true, MaxConcurrency: 2, Soak: durationpb.New(time.Hour)}
	_, err := e.SubmitStaged(context.Background(), owner, "", nil, slow, versioned("v1"))
	require.NoError(t, err)
	st := waitFor(t, e, owner, "soaking after wave 1", func(st *rsyncv1.RolloutStatus) bool {
		return st.GetProgress().GetWaveSettled() != nil
	})
	require.False(t, st.GetSettled(), "clusters are still to be reached")
	require.Equal(t, rsyncv1.State_STATE_PENDING, st.GetState())
	require.EqualValues(t, 2, st.GetProgress().GetAdmitted())
	require.EqualValues(t, 1, st.GetProgress().GetWave())
	for _, k := range []string{"sim/c0", "sim/c1"} {
		require.Equal(t, "v1", dataOn(t, sims[k]), k)
	}
	for _, k := range []string{"sim/c2", "sim/c3", "sim/c4", "sim/c5"} {
		require.Equal(t, "", dataOn(t, sims[k]), "%s waits for the soak", k)
	}
	// Stopped with clusters still to reach, it shows stopped, not applied.
	require.NoError(t, e.Stop(context.Background(), owner))
	st = waitFor(t, e, owner, "stopped", func(st *rsyncv1.RolloutStatus) bool { return st.GetStopped() })
	require.Equal(t, rsyncv1.State_STATE_STOPPED, st.GetState())
}

// An update of a paused rollout keeps as previous the generation before
// the paused one (what the clusters not reached hold): a rollback after it
// returns there, not to the half-rolled generation.
func TestProgressiveUpdateOfPausedKeepsThePrevious(t *testing.T) {
	t.Parallel()
	e, sims := stagedEngine(t)
	ctx := context.Background()
	const owner = "lc/p/again"
	pausedAtV2(t, e, owner)
	halt := &rsyncv1.RolloutStrategy{Progressive: true, MaxConcurrency: 2, Soak: durationpb.New(time.Hour)}
	_, err := e.UpdateStaged(ctx, owner, "", nil, halt, versioned("v3"))
	require.NoError(t, err)
	waitFor(t, e, owner, "soaking after wave 1 of v3", func(st *rsyncv1.RolloutStatus) bool {
		return st.GetGeneration() == 3 && st.GetProgress().GetWaveSettled() != nil
	})
	require.Equal(t, "v3", dataOn(t, sims["sim/c0"]))
	require.Equal(t, "v1", dataOn(t, sims["sim/c5"]))
	_, err = e.Rollback(ctx, owner)
	require.NoError(t, err)
	waitFor(t, e, owner, "rolled back", func(st *rsyncv1.RolloutStatus) bool {
		return settledIn(rsyncv1.State_STATE_APPLIED)(st) && st.GetGeneration() == 4
	})
	for k, c := range sims {
		require.Equal(t, "v1", dataOn(t, c), k)
	}
}
