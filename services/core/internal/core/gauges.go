package core

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/store"
)

// The gauges core exports, read when Prometheus scrapes
// (docs/observability.md, "Metrics").
//
// dcm_logical_clouds counts by the state each logical cloud's status shows
// (derive): one store query for the records, and one GetRolloutStates call
// to the resource synchronizer per 1,000 logical clouds that were applied.
var (
	cloudsDesc = prometheus.NewDesc("dcm_logical_clouds",
		"Logical clouds by state, the word their status answers (Created, Instantiating, Instantiated, InstantiateFailed, "+
			"Terminating, Terminated, TerminateFailed, Paused): the stored lifecycle and the resource synchronizer's status read at "+
			"scrape time, the same on every core replica.",
		[]string{"state"}, nil)
	cloudsErrorDesc = prometheus.NewDesc("dcm_logical_clouds_scrape_error",
		"1 when this scrape could not count the logical clouds (store or resource synchronizer error, or no answer within "+
			"the time limit): dcm_logical_clouds is then left out; 0 otherwise.",
		nil, nil)
)

// cloudsScrapeTimeout bounds a scrape's store read, below Prometheus'
// default scrape timeout (10 s).
const cloudsScrapeTimeout = 5 * time.Second

// states are the states shown, each reported even when no logical cloud is
// in it.
var states = []string{StateCreated, StateInstantiating, StateInstantiated, StateInstantiateFailed,
	StateTerminating, StateTerminated, StateTerminateFailed, StatePaused}

// countFunc counts the logical clouds of one core by state.
type countFunc func(ctx context.Context) (map[string]int, error)

// cloudCounter is the collector of dcm_logical_clouds. A process runs core
// once; a test process may run several, each on its own store: the gauge
// is then the sum over them.
type cloudCounter struct {
	timeout time.Duration

	mu      sync.Mutex
	next    int
	sources map[int]countFunc
}

func newCloudCounter(timeout time.Duration) *cloudCounter {
	return &cloudCounter{timeout: timeout, sources: map[int]countFunc{}}
}

// add counts with f from now on; the function returned stops it.
func (c *cloudCounter) add(f countFunc) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.next
	c.next++
	c.sources[id] = f
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.sources, id)
	}
}

// Describe implements prometheus.Collector.
func (c *cloudCounter) Describe(ch chan<- *prometheus.Desc) {
	ch <- cloudsDesc
	ch <- cloudsErrorDesc
}

// Collect implements prometheus.Collector: it counts now, within the
// timeout. A source that errs or does not answer in time makes the
// scrape report the error gauge, not a partial count, and not wait.
func (c *cloudCounter) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	sources := slices.Collect(maps.Values(c.sources))
	c.mu.Unlock()
	if len(sources) == 0 {
		return // core stopped: nothing to say
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	type result struct {
		n   map[string]int
		err error
	}
	// Buffered: a source answering after the timeout does not block.
	results := make(chan result, len(sources))
	for _, f := range sources {
		go func() {
			n, err := f(ctx)
			results <- result{n, err}
		}()
	}
	total := map[string]int{}
	for _, st := range states {
		total[st] = 0
	}
	failed := false
	for range sources {
		select {
		case r := <-results:
			if r.err != nil {
				failed = true
			}
			for p, n := range r.n {
				total[p] += n
			}
		case <-ctx.Done():
			failed = true
		}
		if failed {
			break
		}
	}
	if failed {
		ch <- prometheus.MustNewConstMetric(cloudsErrorDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(cloudsErrorDesc, prometheus.GaugeValue, 0)
	for p, n := range total {
		ch <- prometheus.MustNewConstMetric(cloudsDesc, prometheus.GaugeValue, float64(n), p)
	}
}

// countByState reads every logical cloud record of st (one query) and
// their rollouts' states (GetRolloutStates, 1,000 at a time), and counts
// the live ones by state; those marked for deletion are on their way out
// and not counted.
func countByState(st *store.Store, rsync rsyncv1.RsyncInternalServiceClient) countFunc {
	clouds := cloudRecords(st)
	return func(ctx context.Context) (map[string]int, error) {
		all, err := clouds.All(ctx)
		if err != nil {
			return nil, err
		}
		var owners []string
		for _, it := range all {
			if !it.Deleting && phaseOf(it.Msg) != phaseCreated {
				owners = append(owners, rolloutOwner(it.Parent, it.Msg.GetMetadata().GetName()))
			}
		}
		rollouts, err := rolloutStates(ctx, rsync, owners)
		if err != nil {
			return nil, err
		}
		n := map[string]int{}
		for _, it := range all {
			if !it.Deleting {
				n[derive(phaseOf(it.Msg), rollouts[rolloutOwner(it.Parent, it.Msg.GetMetadata().GetName())])]++
			}
		}
		return n, nil
	}
}

// rolloutStatesBatch is the most owners one GetRolloutStates call names.
const rolloutStatesBatch = 1000

// rolloutStates is the status (without clusters) of each owner's rollout
// that the resource synchronizer has, by owner.
func rolloutStates(ctx context.Context, rsync rsyncv1.RsyncInternalServiceClient, owners []string) (map[string]*rsyncv1.RolloutStatus, error) {
	out := make(map[string]*rsyncv1.RolloutStatus, len(owners))
	for batch := range slices.Chunk(owners, rolloutStatesBatch) {
		resp, err := rsync.GetRolloutStates(ctx, &rsyncv1.GetRolloutStatesRequest{Owners: batch})
		if err != nil {
			return nil, err
		}
		for _, st := range resp.GetStatuses() {
			out[st.GetOwner()] = st
		}
	}
	return out, nil
}

var (
	clouds         = newCloudCounter(cloudsScrapeTimeout)
	registerClouds sync.Once
)

// CountLogicalClouds has the process's /metrics (Prometheus' default
// registry) report dcm_logical_clouds from st and rsync at each scrape; the
// function returned stops it (an OnStop of the program).
func CountLogicalClouds(st *store.Store, rsync rsyncv1.RsyncInternalServiceClient) func(context.Context) {
	registerClouds.Do(func() { prometheus.MustRegister(clouds) })
	remove := clouds.add(countByState(st, rsync))
	return func(context.Context) { remove() }
}
