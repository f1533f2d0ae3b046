package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// gather collects c through a registry of its own, as a scrape does, and
// returns dcm_logical_clouds by phase and dcm_logical_clouds_scrape_error
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
				require.Equal(t, "phase", m.GetLabel()[0].GetName())
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

// TestLogicalCloudsGauge: dcm_logical_clouds counts the logical clouds of
// the store by stored phase at each scrape (records without a lifecycle
// are created; those marked for deletion are left out), every phase
// reported, zero included; it follows the store between scrapes.
func TestLogicalCloudsGauge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t)
	recs := cloudRecords(st)
	c := newCloudCounter(5 * time.Second)
	stop := c.add(countByPhase(st))

	byPhase, scrapeErr := gather(t, c)
	require.Zero(t, scrapeErr)
	require.Equal(t, map[string]float64{"Created": 0, "Instantiated": 0, "Terminated": 0}, byPhase, "every phase, none yet")

	put := func(name, phase string) {
		lc := &corev1.LogicalCloud{Metadata: &typesv1.Metadata{Name: name}}
		if phase != "" {
			lc.Lifecycle = &corev1.Lifecycle{Phase: phase}
		}
		require.NoError(t, recs.Create(ctx, store.Key("p1", name), "p1", lc))
	}
	put("old", "") // made before the lifecycle: created
	put("new", phaseCreated)
	put("a1", phaseApplying)
	put("a2", phaseApplying)
	put("a3", "applying") // stored before the phase spoke the states' words
	put("t1", phaseTerminating)
	put("gone", phaseApplying)
	_, err := recs.MarkDeleting(ctx, store.Key("p1", "gone"))
	require.NoError(t, err)

	byPhase, scrapeErr = gather(t, c)
	require.Zero(t, scrapeErr)
	require.Equal(t, map[string]float64{"Created": 2, "Instantiated": 3, "Terminated": 1}, byPhase)

	_, err = recs.Modify(ctx, store.Key("p1", "a1"), func(lc *corev1.LogicalCloud) error {
		lc.Lifecycle.Phase = phaseTerminating
		return nil
	})
	require.NoError(t, err)
	byPhase, _ = gather(t, c)
	require.Equal(t, map[string]float64{"Created": 2, "Instantiated": 2, "Terminated": 2}, byPhase, "read at scrape time")

	stop()
	byPhase, scrapeErr = gather(t, c)
	require.Empty(t, byPhase, "core stopped: nothing reported")
	require.Equal(t, -1.0, scrapeErr)
}

// TestLogicalCloudsGaugeErrors: a store that fails, or does not answer
// within the time limit, makes the scrape report
// dcm_logical_clouds_scrape_error 1 and no count (not a partial one), and
// the scrape returns instead of waiting for it.
func TestLogicalCloudsGaugeErrors(t *testing.T) {
	t.Parallel()
	ok := func(context.Context) (map[string]int, error) { return map[string]int{phaseApplying: 4}, nil }
	failing := func(context.Context) (map[string]int, error) { return nil, errors.New("store down") }
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	hanging := func(context.Context) (map[string]int, error) {
		<-release // ignores its context, as a stuck call would
		return map[string]int{phaseApplying: 1}, nil
	}

	c := newCloudCounter(5 * time.Second)
	c.add(ok)
	c.add(ok)
	byPhase, scrapeErr := gather(t, c)
	require.Zero(t, scrapeErr)
	require.Equal(t, map[string]float64{"Created": 0, "Instantiated": 8, "Terminated": 0}, byPhase, "two cores in one process: the sum")

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
	c.add(countByPhase(st))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st.Close(ctx)
	byPhase, scrapeErr := gather(t, c)
	require.Equal(t, 1.0, scrapeErr)
	require.Empty(t, byPhase)
}
