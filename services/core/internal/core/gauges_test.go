package core

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// gather collects c through a registry of its own, as a scrape does, and
// returns dcm_logical_clouds by state and dcm_logical_clouds_scrape_error
// (-1 when absent).
func gather(t *testing.T, c prometheus.Collector) (map[string]float64, float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	byPhase, scrapeErr := map[string]float64{}, -1.0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "dcm_logical_clouds":
				require.Len(t, m.GetLabel(), 1)
				require.Equal(t, "state", m.GetLabel()[0].GetName())
				byPhase[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			case "dcm_logical_clouds_scrape_error":
				scrapeErr = m.GetGauge().GetValue()
			default:
				t.Fatalf("unexpected metric %s", mf.GetName())
			}
		}
	}
	return byPhase, scrapeErr
}

// rolloutsAnswer is the resource synchronizer's side of the gauge: it
// answers GetRolloutStates from a table of statuses and records the calls.
// The gauge's logic (which owners it asks for, derive) is what is tested;
// the call itself is tested against the real engine in services/rsync.
type rolloutsAnswer struct {
	rsyncv1.RsyncInternalServiceClient
	statuses map[string]*rsyncv1.RolloutStatus
	calls    [][]string
	err      error
}

func (r *rolloutsAnswer) GetRolloutStates(_ context.Context, req *rsyncv1.GetRolloutStatesRequest, _ ...grpc.CallOption) (*rsyncv1.GetRolloutStatesResponse, error) {
	r.calls = append(r.calls, req.GetOwners())
	if r.err != nil {
		return nil, r.err
	}
	out := &rsyncv1.GetRolloutStatesResponse{}
	for _, o := range req.GetOwners() {
		if st, ok := r.statuses[o]; ok {
			out.Statuses = append(out.Statuses, st)
		}
	}
	return out, nil
}

// TestLogicalCloudsGauge: dcm_logical_clouds counts the logical clouds of
// the store by the state their status shows, at each scrape: the stored
// phase (records without a lifecycle are created, old phase words count as
// the new; those marked for deletion are left out) and the rollouts'
// states, asked for in one call for the applied ones only; every state
// reported, zero included; it follows the store between scrapes.
func TestLogicalCloudsGauge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t)
	recs := cloudRecords(st)
	rollouts := &rolloutsAnswer{statuses: map[string]*rsyncv1.RolloutStatus{}}
	c := newCloudCounter(5 * time.Second)
	stop := c.add(countByState(st, rollouts))

	zero := map[string]float64{"Created": 0, "Instantiating": 0, "Instantiated": 0, "InstantiateFailed": 0,
		"Terminating": 0, "Terminated": 0, "TerminateFailed": 0, "Paused": 0}
	byState, scrapeErr := gather(t, c)
	require.Zero(t, scrapeErr)
	require.Equal(t, zero, byState, "every state, none yet")
	require.Empty(t, rollouts.calls, "nothing applied: the resource synchronizer is not asked")

	put := func(name, phase string, rs *rsyncv1.RolloutStatus) {
		lc := &corev1.LogicalCloud{Metadata: &typesv1.Metadata{Name: name}}
		if phase != "" {
			lc.Lifecycle = &corev1.Lifecycle{Phase: phase}
		}
		require.NoError(t, recs.Create(ctx, store.Key("p1", name), "p1", lc))
		if rs != nil {
			rs.Owner = rolloutOwner("p1", name)
			rollouts.statuses[rs.Owner] = rs
		}
	}
	applied := func() *rsyncv1.RolloutStatus {
		return &rsyncv1.RolloutStatus{State: rsyncv1.State_STATE_APPLIED, Settled: true}
	}
	put("old", "", nil) // made before the lifecycle: Created
	put("new", phaseCreated, nil)
	put("a1", phaseApplying, applied())
	put("a2", "applying", &rsyncv1.RolloutStatus{State: rsyncv1.State_STATE_RETRYING}) // an old phase word
	put("a3", phaseApplying, nil)                                                      // rsync lost it
	put("a4", phaseApplying, &rsyncv1.RolloutStatus{State: rsyncv1.State_STATE_FAILED, Settled: true,
		Progress: &rsyncv1.RolloutProgress{Paused: true}}) // a staged update paused
	put("t1", phaseTerminating, &rsyncv1.RolloutStatus{Deleting: true, State: rsyncv1.State_STATE_PENDING})
	put("t2", phaseTerminating, &rsyncv1.RolloutStatus{Deleting: true, State: rsyncv1.State_STATE_FAILED, Settled: true})
	put("t3", phaseTerminating, nil) // deleted everywhere, rollout gone
	put("gone", phaseApplying, applied())
	_, err := recs.MarkDeleting(ctx, store.Key("p1", "gone"))
	require.NoError(t, err)

	byState, scrapeErr = gather(t, c)
	require.Zero(t, scrapeErr)
	want := maps.Clone(zero)
	maps.Copy(want, map[string]float64{"Created": 2, "Instantiated": 1, "Instantiating": 1, "InstantiateFailed": 1,
		"Terminating": 1, "TerminateFailed": 1, "Terminated": 1, "Paused": 1})
	require.Equal(t, want, byState)
	require.Len(t, rollouts.calls, 1, "one call per scrape")
	require.ElementsMatch(t, []string{"lc/p1/a1", "lc/p1/a2", "lc/p1/a3", "lc/p1/a4", "lc/p1/t1", "lc/p1/t2", "lc/p1/t3"}, rollouts.calls[0],
		"the applied live logical clouds only")

	rollouts.statuses["lc/p1/a2"] = &rsyncv1.RolloutStatus{Owner: "lc/p1/a2", State: rsyncv1.State_STATE_APPLIED, Settled: true}
	byState, _ = gather(t, c)
	require.Equal(t, 2.0, byState["Instantiated"], "read at scrape time")
	require.Equal(t, 0.0, byState["Instantiating"])

	rollouts.err = status.Error(codes.Unavailable, "rsync down")
	byState, scrapeErr = gather(t, c)
	require.Equal(t, 1.0, scrapeErr, "the resource synchronizer's error is the scrape's")
	require.Empty(t, byState)

	stop()
	byState, scrapeErr = gather(t, c)
	require.Empty(t, byState, "core stopped: nothing reported")
	require.Equal(t, -1.0, scrapeErr)
}

// TestLogicalCloudsGaugeErrors: a store that fails, or does not answer
// within the time limit, makes the scrape report
// dcm_logical_clouds_scrape_error 1 and no count (not a partial one), and
// the scrape returns instead of waiting for it.
func TestLogicalCloudsGaugeErrors(t *testing.T) {
	t.Parallel()
	ok := func(context.Context) (map[string]int, error) { return map[string]int{StateInstantiated: 4}, nil }
	failing := func(context.Context) (map[string]int, error) { return nil, errors.New("store down") }
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hanging := func(context.Context) (map[string]int, error) {
		<-release // ignores its context, as a stuck call would
		return map[string]int{StateInstantiated: 1}, nil
	}

	c := newCloudCounter(5 * time.Second)
	c.add(ok)
	c.add(ok)
	byPhase, scrapeErr := gather(t, c)
	require.Zero(t, scrapeErr)
	require.Equal(t, map[string]float64{"Created": 0, "Instantiating": 0, "Instantiated": 8, "InstantiateFailed": 0,
		"Terminating": 0, "Terminated": 0, "TerminateFailed": 0, "Paused": 0}, byPhase, "two cores in one process: the sum")

	stopFailing := c.add(failing)
	byPhase, scrapeErr = gather(t, c)
	require.Equal(t, 1.0, scrapeErr)
	require.Empty(t, byPhase, "no partial count")
	stopFailing()

	c.timeout = 50 * time.Millisecond
	c.add(hanging)
	byPhase, scrapeErr = gather(t, c)
	require.Equal(t, 1.0, scrapeErr, "the time limit ends the scrape")
	require.Empty(t, byPhase)
}

// TestLogicalCloudsGaugeOnAClosedStore: the real store's error path.
func TestLogicalCloudsGaugeOnAClosedStore(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	c := newCloudCounter(5 * time.Second)
	c.add(countByState(st, &rolloutsAnswer{}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st.Close(ctx)
	byPhase, scrapeErr := gather(t, c)
	require.Equal(t, 1.0, scrapeErr)
	require.Empty(t, byPhase)
}
