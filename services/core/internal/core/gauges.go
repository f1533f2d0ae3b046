package core

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dcm-project/dcm/platform/store"
)

// The gauges core exports, read from the store when Prometheus scrapes
// (docs/observability.md, "Metrics").
//
// dcm_logical_clouds counts by the stored phase, not by the state GET
// .../status shows: the state also needs the resource synchronizer's
// status of each logical cloud's rollout, one GetRolloutStatus call per
// logical cloud (derive), and rsync has no call that lists them; a scrape
// costs one store query instead, whatever the number of logical clouds.
var (
	cloudsDesc = prometheus.NewDesc("dcm_logical_clouds",
		"Logical clouds by the lifecycle phase stored with them, the state the last transition asked for: Created (state Created), "+
			"Instantiated (Instantiating, Instantiated or InstantiateFailed), Terminated (Terminating, Terminated or TerminateFailed); "+
			"read from the store at scrape time, the same on every core replica.",
		[]string{"phase"}, nil)
	cloudsErrorDesc = prometheus.NewDesc("dcm_logical_clouds_scrape_error",
		"1 when this scrape could not count the logical clouds (store error, or no answer within the time limit): "+
			"dcm_logical_clouds is then left out; 0 otherwise.",
		nil, nil)
)

// cloudsScrapeTimeout bounds a scrape's store read, below Prometheus'
// default scrape timeout (10 s).
const cloudsScrapeTimeout = 5 * time.Second

// phases are the stored phases, each reported even when no logical cloud
// is in it.
var phases = []string{phaseCreated, phaseApplying, phaseTerminating}

// countFunc counts the logical clouds of one store by phase.
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
	for _, p := range phases {
		total[p] = 0
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

// countByPhase reads every logical cloud record of st (one query) and
// counts the live ones by stored phase; those marked for deletion are on
// their way out and not counted.
func countByPhase(st *store.Store) countFunc {
	clouds := cloudRecords(st)
	return func(ctx context.Context) (map[string]int, error) {
		all, err := clouds.All(ctx)
		if err != nil {
			return nil, err
		}
		n := map[string]int{}
		for _, it := range all {
			if !it.Deleting {
				n[phaseOf(it.Msg)]++
			}
		}
		return n, nil
	}
}

var (
	clouds         = newCloudCounter(cloudsScrapeTimeout)
	registerClouds sync.Once
)

// CountLogicalClouds has the process's /metrics (Prometheus' default
// registry) report dcm_logical_clouds from st at each scrape; the function
// returned stops it (an OnStop of the program).
func CountLogicalClouds(st *store.Store) func(context.Context) {
	registerClouds.Do(func() { prometheus.MustRegister(clouds) })
	remove := clouds.add(countByPhase(st))
	return func(context.Context) { remove() }
}
