package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Cluster health (docs/fleet.md "Cluster health"): every registered
// cluster is probed (Prober.Readyz, with the cluster's own credentials)
// every HealthConfig.Interval, jittered, by the replica that holds the
// cluster's shard, at most HealthConfig.Concurrency at once (its own
// slots: a probe never takes a rollout's). The result is kept in memory
// and written to the store (HealthCollection, one record per cluster)
// when the state changes, and otherwise at most every RecordEvery, so
// that a steady fleet costs a write per cluster per RecordEvery, not per
// probe. Readers (the registry, rollout statuses, any replica) read the
// records; one whose last write is older than StaleAfter shows Unknown: no
// replica probes the cluster any more.

// HealthConfig tunes the probes.
type HealthConfig struct {
	// Interval is how often each cluster is probed; 0 disables probing.
	Interval time.Duration
	// Concurrency bounds the probes in flight on this replica.
	Concurrency int
	// Timeout bounds one probe (default: the interval, at most 10s).
	Timeout time.Duration
	// RecordEvery is how often an unchanged state is written again (its
	// last-seen and checked times); default: 10 intervals, at least 10s.
	RecordEvery time.Duration
}

func (c *HealthConfig) defaults() {
	if c.Concurrency <= 0 {
		c.Concurrency = 32
	}
	if c.Timeout <= 0 {
		c.Timeout = min(c.Interval, 10*time.Second)
	}
	if c.RecordEvery <= 0 {
		c.RecordEvery = max(10*c.Interval, 10*time.Second)
	}
}

// StaleAfter is how old a record's last write may be before readers show
// Unknown: RecordEvery and three intervals.
func (c HealthConfig) StaleAfter() time.Duration {
	c.defaults()
	return c.RecordEvery + 3*c.Interval
}

var (
	probesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcm_rsync_cluster_probes_total",
		Help: "Cluster health probes (GET /readyz) this replica made, by resulting state.",
	}, []string{"state"})
	healthWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dcm_rsync_cluster_health_writes_total",
		Help: "Cluster health records written to the store, by reason (change, refresh) and result (ok, error).",
	}, []string{"reason", "result"})
	clustersDesc = prometheus.NewDesc("dcm_rsync_clusters",
		"Registered clusters this replica probes (those of its shards), by health state.", []string{"state"}, nil)
	// probers are the running Health loops; the gauge adds theirs up.
	probers = struct {
		sync.Mutex
		all map[*Health]struct{}
	}{all: map[*Health]struct{}{}}
)

func init() {
	prometheus.MustRegister(probesTotal, healthWrites, clustersGauge{})
}

// clustersGauge is dcm_rsync_clusters, computed at scrape time from the
// running probers' states.
type clustersGauge struct{}

func (clustersGauge) Describe(ch chan<- *prometheus.Desc) { ch <- clustersDesc }

func (clustersGauge) Collect(ch chan<- prometheus.Metric) {
	n := map[string]int{}
	probers.Lock()
	for h := range probers.all {
		for s, c := range h.Counts() {
			n[s] += c
		}
	}
	probers.Unlock()
	for _, s := range HealthStates {
		ch <- prometheus.MustNewConstMetric(clustersDesc, prometheus.GaugeValue, float64(n[s]), s)
	}
}

// Health probes the clusters of this replica's shards.
type Health struct {
	cfg     HealthConfig
	engine  *Engine
	connect Connector
	// registered lists every registered cluster by "provider/cluster".
	registered func(ctx context.Context) ([]string, error)
	records    *store.Records[*rsyncv1.StoredClusterHealth]
	log        *zap.Logger
	// Probes counts the probes this replica made; Writes the records it wrote.
	Probes, Writes atomic.Int64

	mu    sync.Mutex
	known map[string]*probed // the held clusters, by "provider/cluster"
}

// probed is what this replica knows of one cluster it probes.
type probed struct {
	due      time.Time
	inflight bool
	state    string // in memory, Unknown before the first probe
	// rec is the stored record as last read or written (nil: none or not
	// read yet); loaded says it was read.
	rec    *rsyncv1.StoredClusterHealth
	loaded bool
}

// NewHealth makes the prober of e's clusters; registered lists the
// registered clusters. Run starts it.
// Records are the health records (HealthRecords).
func NewHealth(records *store.Records[*rsyncv1.StoredClusterHealth], e *Engine, connect Connector, registered func(context.Context) ([]string, error), cfg HealthConfig, log *zap.Logger) *Health {
	cfg.defaults()
	return &Health{
		cfg: cfg, engine: e, connect: connect, registered: registered, log: log,
		records: records, known: map[string]*probed{},
	}
}

// HealthRecords opens the health records on st (for readers).
func HealthRecords(st *store.Store) *store.Records[*rsyncv1.StoredClusterHealth] {
	return store.NewRecords(st, HealthCollection, "cluster health",
		func() *rsyncv1.StoredClusterHealth { return &rsyncv1.StoredClusterHealth{} })
}

// Holds says whether this replica holds the shard of the cluster.
func (e *Engine) Holds(provider, cluster string) bool {
	e.board.mu.Lock()
	defer e.board.mu.Unlock()
	return e.shards.active(shardOf(clusterKey(provider, cluster), e.shards.n)) != nil
}

// heldShards is the shards this replica holds, and how many shards there are.
func (e *Engine) heldShards() (map[int]bool, int) {
	e.board.mu.Lock()
	defer e.board.mu.Unlock()
	out := make(map[int]bool, len(e.shards.held))
	for i := range e.shards.held {
		out[i] = true
	}
	return out, e.shards.n
}

// Counts is how many of the clusters this replica probes are in each state.
func (h *Health) Counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, p := range h.known {
		out[p.state]++
	}
	return out
}

// Run probes until ctx ends; with probing disabled it only waits.
func (h *Health) Run(ctx context.Context) error {
	if h.cfg.Interval <= 0 {
		<-ctx.Done()
		return nil
	}
	probers.Lock()
	probers.all[h] = struct{}{}
	probers.Unlock()
	defer func() {
		probers.Lock()
		delete(probers.all, h)
		probers.Unlock()
	}()
	work := make(chan string)
	var wg sync.WaitGroup
	for range h.cfg.Concurrency {
		wg.Go(func() {
			for key := range work {
				h.probe(ctx, key)
			}
		})
	}
	defer wg.Wait()
	defer close(work)
	tick := time.NewTicker(min(max(h.cfg.Interval/20, 10*time.Millisecond), time.Second))
	defer tick.Stop()
	var listed time.Time
	var registered []string
	for {
		if time.Since(listed) >= max(h.cfg.Interval, time.Second) { // the registry: every cluster record
			keys, err := h.registered(ctx)
			if err == nil {
				registered, listed = keys, time.Now()
			} else if ctx.Err() == nil {
				h.log.Warn("cluster health: list the registry", zap.Error(err))
			}
		}
		dueKeys, gone := h.due(registered)
		for _, key := range gone {
			// Deleted from the registry (which deletes its record): a
			// probe in flight meanwhile may have written it again.
			if err := h.records.Delete(ctx, key); err != nil && errs.Code(err) != codes.NotFound && ctx.Err() == nil {
				h.log.Debug("cluster health: delete", zap.String("cluster", key), zap.Error(err))
			}
		}
		h.preload(ctx)
		for _, key := range dueKeys {
			select {
			case work <- key:
			case <-ctx.Done():
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// due updates the clusters this replica probes (registered and of its
// shards) and returns those whose probe is due, marking them in flight,
// and those it probed that are no longer registered.
func (h *Health) due(registered []string) (due, gone []string) {
	shards, n := h.engine.heldShards() // one lock of the engine's, not one per cluster
	held := make(map[string]bool, len(registered))
	registeredSet := make(map[string]bool, len(registered))
	for _, key := range registered {
		registeredSet[key] = true
		if shards[shardOf(key, n)] {
			held[key] = true
		}
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for key := range h.known {
		if !held[key] {
			delete(h.known, key) // deregistered, or its shard is another replica's now
			if !registeredSet[key] {
				gone = append(gone, key)
			}
		}
	}
	for key := range held {
		p := h.known[key]
		if p == nil {
			// First seen: spread the first probes over an interval (a
			// replica that starts or takes shards over probes at the
			// steady rate at once), none due before preload read the
			// records.
			p = &probed{state: HealthUnknown, due: now.Add(1 + rand.N(h.cfg.Interval))}
			h.known[key] = p
			continue
		}
		if !p.inflight && !now.Before(p.due) {
			p.inflight = true
			due = append(due, key)
		}
	}
	return due, gone
}

// preload reads every health record in one store command when clusters
// were newly taken up (this replica started, or took shards over), rather
// than one read per cluster at its first probe.
func (h *Health) preload(ctx context.Context) {
	h.mu.Lock()
	need := false
	for _, p := range h.known {
		if !p.loaded && !p.inflight {
			need = true
			break
		}
	}
	h.mu.Unlock()
	if !need {
		return
	}
	items, err := h.records.All(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("cluster health: read the records", zap.Error(err))
		}
		return // each is read at its probe
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, it := range items {
		if p := h.known[it.ID]; p != nil && !p.loaded && !p.inflight {
			p.rec = it.Msg
		}
	}
	for _, p := range h.known {
		if !p.inflight {
			p.loaded = true
		}
	}
}

// probe probes one cluster and records the result.
func (h *Health) probe(ctx context.Context, key string) {
	provider, cluster, _ := strings.Cut(key, "/")
	state, version, perr := h.ask(ctx, provider, cluster)
	h.mu.Lock()
	p := h.known[key]
	// Ready as this replica last saw it, or as stored (a shard taken over).
	wasReady := p != nil && (p.state == HealthReady || p.state == HealthUnknown && p.loaded && p.rec.GetState() == HealthReady)
	h.mu.Unlock()
	if state == HealthUnreachable && wasReady && ctx.Err() == nil {
		// One dropped connection does not make a Ready cluster
		// Unreachable: ask again at once.
		h.Probes.Add(1)
		probesTotal.WithLabelValues(state).Inc()
		state, version, perr = h.ask(ctx, provider, cluster)
	}
	if ctx.Err() != nil {
		return
	}
	if errors.Is(perr, ErrUnregistered) {
		// Deleted since the registry was read: no record to keep.
		h.mu.Lock()
		delete(h.known, key)
		h.mu.Unlock()
		return
	}
	h.Probes.Add(1)
	probesTotal.WithLabelValues(state).Inc()
	h.mu.Lock()
	p = h.known[key]
	h.mu.Unlock()
	if p == nil {
		return // no longer ours
	}
	h.record(ctx, provider, cluster, p, state, version, perr)
	h.mu.Lock()
	p.state = state
	p.inflight = false
	// ±10 % jitter: probes that started together drift apart.
	p.due = time.Now().Add(h.cfg.Interval*9/10 + rand.N(h.cfg.Interval/5+1))
	h.mu.Unlock()
}

// ask probes a cluster: its state, its version when Ready and the
// version is wanted, and the error that made it not Ready.
func (h *Health) ask(ctx context.Context, provider, cluster string) (string, string, error) {
	cl, err := h.connect.Connect(ctx, provider, cluster)
	if err != nil {
		// The kubeconfig could not be read or used (store down, cluster
		// just deleted): this replica cannot tell.
		return HealthUnknown, "", fmt.Errorf("connect: %w", err)
	}
	pr, ok := cl.(Prober)
	if !ok {
		return HealthUnknown, "", errors.New("the cluster's client cannot be probed")
	}
	pctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	err = pr.Readyz(pctx)
	state := healthOf(err)
	if state != HealthReady {
		return state, "", fmt.Errorf("readyz: %w", err)
	}
	h.mu.Lock()
	p := h.known[clusterKey(provider, cluster)]
	want := p != nil && (!p.loaded || p.rec.GetState() != HealthReady || p.rec.GetServerVersion() == "")
	h.mu.Unlock()
	if !want {
		return state, "", nil
	}
	v, verr := pr.Version(pctx)
	if verr != nil {
		h.log.Debug("cluster health: /version", zap.String("cluster", clusterKey(provider, cluster)), zap.Error(verr))
	}
	return state, v, nil
}

// record writes the result when the state changed or the stored record
// is older than RecordEvery; p is only this probe's (inflight).
func (h *Health) record(ctx context.Context, provider, cluster string, p *probed, state, version string, perr error) {
	id := clusterKey(provider, cluster)
	if !p.loaded {
		cur, err := h.records.Get(ctx, id)
		switch {
		case err == nil:
			p.rec = cur.Msg
		case errs.Code(err) == codes.NotFound:
			p.rec = nil
		default:
			h.log.Warn("cluster health: read", zap.String("cluster", id), zap.Error(err))
			return
		}
		p.loaded = true
	}
	now := time.Now()
	changed := p.rec.GetState() != state
	if !changed && now.Sub(p.rec.GetChecked().AsTime()) < h.cfg.RefreshAfter(id) {
		return
	}
	next := &rsyncv1.StoredClusterHealth{Provider: provider, Cluster: cluster, State: state, Checked: timestamppb.New(now)}
	if p.rec != nil {
		next = proto.CloneOf(p.rec)
		next.State, next.Checked = state, timestamppb.New(now)
	}
	if changed {
		next.Since = timestamppb.New(now)
	}
	if state == HealthReady {
		next.LastSeen = timestamppb.New(now)
		if version != "" {
			next.ServerVersion = version
		}
	}
	if perr != nil {
		next.LastError = perr.Error()
	}
	// Put: no version check (a store-wide scan on the embedded store);
	// one replica holds the shard, and a write lost to a shard moving
	// is overwritten at the new holder's next change or refresh.
	err := h.records.Put(ctx, id, provider, next)
	reason := "refresh"
	if changed {
		reason = "change"
	}
	if err != nil {
		healthWrites.WithLabelValues(reason, "error").Inc()
		if ctx.Err() == nil {
			h.log.Debug("cluster health: write", zap.String("cluster", id), zap.Error(err))
		}
		return
	}
	healthWrites.WithLabelValues(reason, "ok").Inc()
	h.Writes.Add(1)
	if changed {
		h.log.Info("cluster health changed", zap.String("cluster", id), zap.String("from", p.rec.GetState()), zap.String("to", state))
	}
	p.rec = next
}

// RefreshAfter is how old the record of cluster id may grow before an
// unchanged state is written again: between half RecordEvery and all of
// it, fixed per cluster, so that records written together (a first
// round) are not all written again together.
func (c HealthConfig) RefreshAfter(id string) time.Duration {
	c.defaults()
	const parts = 1024
	f := time.Duration(shardOf(id, parts))
	return c.RecordEvery/2 + c.RecordEvery/2*f/parts
}

// Shown is a stored record as readers show it (nil: never probed):
// Unknown when probing is off or no replica wrote it for StaleAfter.
func (c HealthConfig) Shown(rec *rsyncv1.StoredClusterHealth, now time.Time) *rsyncv1.StoredClusterHealth {
	if rec == nil {
		return &rsyncv1.StoredClusterHealth{State: HealthUnknown}
	}
	out := proto.CloneOf(rec)
	switch {
	case c.Interval <= 0:
		out.State = HealthUnknown
	case now.Sub(rec.GetChecked().AsTime()) > c.StaleAfter():
		out.State = HealthUnknown
		out.LastError = fmt.Sprintf("no probe result since %s: no replica probes the cluster", rec.GetChecked().AsTime().UTC().Format(time.RFC3339))
	}
	return out
}
