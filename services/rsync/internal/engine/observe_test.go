package engine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// gated is a simulated cluster whose calls fail with fail while it is set.
type gated struct {
	*engine.Simulated
	fail atomic.Pointer[error]
}

func (g *gated) set(err error) {
	if err == nil {
		g.fail.Store(nil)
		return
	}
	g.fail.Store(&err)
}

func (g *gated) err() error {
	if p := g.fail.Load(); p != nil {
		return *p
	}
	return nil
}

func (g *gated) Apply(ctx context.Context, obj *unstructured.Unstructured, manager string, force bool) (*unstructured.Unstructured, error) {
	if err := g.err(); err != nil {
		return nil, err
	}
	return g.Simulated.Apply(ctx, obj, manager, force)
}

func (g *gated) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	if err := g.err(); err != nil {
		return nil, err
	}
	return g.Simulated.Get(ctx, gvk, namespace, name)
}

func (g *gated) Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID) error {
	if err := g.err(); err != nil {
		return err
	}
	return g.Simulated.Delete(ctx, gvk, namespace, name, uid)
}

// waitGauge polls a gauge until it reads want.
func waitGauge(t *testing.T, name string, g prometheus.Collector, want float64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for got := testutil.ToFloat64(g); got != want; got = testutil.ToFloat64(g) {
		require.True(t, time.Now().Before(deadline), "%s is %v, not %v", name, got, want)
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRetriesFailuresAndGauges: a cluster that is down makes one rollout
// unsettled and one cluster in retry; its retries are logged at info
// with owner and cluster when the cause is new and at attempts 2, 4, 8,
// ..., at debug otherwise; its recovery is logged; both gauges go back to
// 0 when the rollout settles. A terminal failure is logged at info and
// leaves the rollout settled (failed): neither gauge counts it.
func TestRetriesFailuresAndGauges(t *testing.T) {
	t.Parallel()
	down, up := &gated{Simulated: &engine.Simulated{}}, &gated{Simulated: &engine.Simulated{}}
	down.set(errors.New("dial tcp: connection refused"))
	conn := engine.Clusters[*gated]{"sim/c0": down, "sim/c1": up}
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := testConfig
	cfg.RetryBase, cfg.RetryMax = 5*time.Millisecond, 20*time.Millisecond
	e := engine.New(storetest.Open(t), conn, cfg, zap.New(core))
	unsettled, inRetry := e.Gauges()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	const owner = "lc/p/observe"
	sims := engine.SimulatedClusters{"sim/c0": nil, "sim/c1": nil}
	_, err := e.Submit(ctx, owner, simRollout(sims, configMaps("observe", 2)))
	require.NoError(t, err)
	waitFor(t, e, owner, "retrying on c0 for 9 attempts", func(st *rsyncv1.RolloutStatus) bool {
		for _, c := range st.GetClusters() {
			if c.GetCluster() == "c0" {
				return retrying(c).GetAttempts() >= 9
			}
		}
		return false
	})
	require.EqualValues(t, 1, testutil.ToFloat64(unsettled), "dcm_rsync_unsettled_rollouts")
	require.EqualValues(t, 1, testutil.ToFloat64(inRetry), "dcm_rsync_clusters_in_retry")

	failed := logs.FilterMessage("step failed").FilterField(zap.String("cluster", "sim/c0")).All()
	require.GreaterOrEqual(t, len(failed), 9)
	for _, l := range failed[:9] {
		f := l.ContextMap()
		attempt := f["attempt"].(int32)
		require.Equal(t, owner, f["owner"])
		require.Equal(t, true, f["retry"])
		require.Positive(t, f["retry_in"])
		require.Contains(t, f["error"], "connection refused")
		want := zapcore.DebugLevel
		if attempt&(attempt-1) == 0 { // 1 (a new cause), 2, 4, 8
			want = zapcore.InfoLevel
		}
		require.Equal(t, want, l.Level, "attempt %d", attempt)
	}
	require.Empty(t, logs.FilterMessage("step failed").FilterField(zap.String("cluster", "sim/c1")).All())

	down.set(nil)
	waitFor(t, e, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	waitGauge(t, "dcm_rsync_unsettled_rollouts", unsettled, 0)
	waitGauge(t, "dcm_rsync_clusters_in_retry", inRetry, 0)
	recovered := logs.FilterMessage("step succeeded after retries").All()
	require.Len(t, recovered, 1)
	require.Equal(t, zapcore.InfoLevel, recovered[0].Level)
	require.Equal(t, "sim/c0", recovered[0].ContextMap()["cluster"])
	require.Equal(t, owner, recovered[0].ContextMap()["owner"])

	// A terminal failure: logged at info, not retried, settled.
	up.set(engine.Terminal(errors.New("the API server refused it")))
	_, err = e.Update(ctx, owner, simRollout(sims, configMaps("observe", 3)))
	require.NoError(t, err)
	waitFor(t, e, owner, "failed on c1", settledIn(rsyncv1.State_STATE_FAILED))
	terminal := logs.FilterMessage("step failed").FilterField(zap.String("cluster", "sim/c1")).All()
	require.Len(t, terminal, 1)
	require.Equal(t, zapcore.InfoLevel, terminal[0].Level)
	require.Equal(t, false, terminal[0].ContextMap()["retry"])
	require.NotContains(t, terminal[0].ContextMap(), "retry_in")
	require.EqualValues(t, 0, testutil.ToFloat64(unsettled))
	require.EqualValues(t, 0, testutil.ToFloat64(inRetry))
}
