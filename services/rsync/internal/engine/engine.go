package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

var (
	operations = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "dcm_rsync_operations_total",
		Help: "Resource operations on clusters by operation (apply, delete) and result (ok, retry, failed).",
	}, []string{"operation", "result"})
	storeWrites = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "dcm_rsync_store_writes_total",
		Help: "Rollout cluster states written to the store, by result (ok, error).",
	}, []string{"result"})
)

// Config tunes the engine.
type Config struct {
	// Concurrency bounds how many clusters are worked on at once.
	Concurrency int
	// RetryBase is the first retry delay; it doubles per attempt up to
	// RetryMax, and each delay is drawn from its upper half (jitter).
	RetryBase, RetryMax time.Duration
	// ForceConflicts takes over fields other field managers own (never
	// another owner's object, nor one DCM did not create).
	ForceConflicts bool
	// Checkpoint is how often a long pass saves its progress.
	Checkpoint time.Duration
	// CertificateWait is how long a pass waits for a signer to issue an
	// approved CSR's certificate before it retries later.
	CertificateWait time.Duration
	// DeleteWait is how long a pass waits for a deleted object (a
	// Namespace being finalized) to be gone before it retries later.
	DeleteWait time.Duration
	// Replica names this replica among rsync's (shards.go); empty: the
	// host name and process id. A replica restarted under the same name
	// takes its shards back at once instead of waiting for their leases
	// to expire, so two live replicas must never share a name.
	Replica string
	// Shards is how many shards clusters are split into among replicas;
	// every replica of one store must use the same number.
	Shards int
	// LeaseTTL is how long a shard lease lasts without renewal: a dead
	// replica's clusters are taken over within it (plus LeaseRenew).
	LeaseTTL time.Duration
	// LeaseRenew is how often leases are renewed and rebalanced.
	LeaseRenew time.Duration
	// Poll is how often a replica reads the rollouts' versions to learn
	// the changes other replicas stored.
	Poll time.Duration
	// PurgeAfter is how long a deleted rollout stays in the store after
	// its deletion settled with every resource deleted (purge.go).
	PurgeAfter time.Duration
	// DriftInterval is how often every object rsync applied is compared
	// with its manifest (drift*.go), besides the watches; negative: drift
	// is neither watched nor compared.
	DriftInterval time.Duration
}

func (c *Config) defaults() {
	if c.Concurrency <= 0 {
		c.Concurrency = 512
	}
	if c.RetryBase <= 0 {
		c.RetryBase = time.Second
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 5 * time.Minute
	}
	c.RetryMax = max(c.RetryMax, c.RetryBase)
	if c.Checkpoint <= 0 {
		c.Checkpoint = time.Second
	}
	if c.CertificateWait <= 0 {
		c.CertificateWait = 10 * time.Second
	}
	if c.DeleteWait <= 0 {
		c.DeleteWait = 10 * time.Second
	}
	if c.Shards <= 0 {
		c.Shards = 64
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 8 * time.Second
	}
	if c.LeaseRenew <= 0 || c.LeaseRenew > c.LeaseTTL/4 {
		c.LeaseRenew = c.LeaseTTL / 5
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.PurgeAfter <= 0 {
		c.PurgeAfter = time.Minute
	}
	if c.DriftInterval == 0 {
		c.DriftInterval = 5 * time.Minute
	}
}

// Engine applies owners' rollouts to clusters. Its in-memory state is
// guarded by mu; a worker goroutine per cluster runs the passes
// (worker.go, pass.go, step.go) toward what reconcile decided
// (reconcile.go); the status writer saves cluster states (statuswriter.go).
type Engine struct {
	cfg      Config
	log      *zap.Logger
	connect  Connector
	rollouts *store.Records[*rsyncv1.StoredRollout]
	states   *store.Records[*rsyncv1.StoredClusterState]
	sem      chan struct{}
	loaded   chan struct{}
	// writes counts store writes (the benchmark reports them per cluster).
	writes atomic.Int64

	mu      sync.Mutex
	ctx     context.Context
	owners  map[string]*owner
	workers map[string]*worker
	// claims is rsync's record of who owns what on each cluster: by
	// cluster key, the owner of each object (by key) it applied for that
	// owner and has not deleted; the owned flags of the tasks' resources,
	// indexed.
	claims  map[string]map[string]string
	running sync.WaitGroup
	// saver is the store writer of cluster states (statuswriter.go).
	saver *statusWriter
	// shards is this replica's share of the clusters (shards.go).
	shards *shards
	// stamps hold each rollout record's version, for the other replicas'
	// polls (replicas.go).
	stamps *store.Stamps
	// apiMu serializes the API calls that change desired state.
	apiMu sync.Mutex
}

// owner is one rollout: its desired state and a task per cluster.
type owner struct {
	rec     *rsyncv1.StoredRollout
	version int64            // store version of rec
	objs    []*object        // rec.Manifests parsed
	tasks   map[string]*task // by cluster key
	changed chan struct{}    // closed at each status change
	// refreshed is when the states of its clusters that other replicas
	// work on were last read (replicas.go).
	refreshed time.Time
	// deletedAt is when the sweep first saw its deletion settled (purge.go).
	deletedAt time.Time
	// trace is the change this replica received for rec's generation (trace.go).
	trace passTrace
}

// task is one owner on one cluster.
type task struct {
	owner             *owner
	provider, cluster string
	state             *rsyncv1.StoredClusterState // observed
	desired           map[string]*object          // by key, for apply
	stateVersion      int64                       // seq of its last save (statejournal.go); 0: not saved yet
	stateID           string                      // id of its last save
	dirty             bool
	lastFlush         time.Time
	next              time.Time // due then (zero: now)
	cancel            context.CancelFunc
}

// New makes an engine over st. Run starts it.
func New(st *store.Store, connect Connector, cfg Config, log *zap.Logger) *Engine {
	cfg.defaults()
	e := &Engine{
		cfg: cfg, log: log, connect: connect,
		rollouts: store.NewRecords(st, RolloutsCollection, "rollout", func() *rsyncv1.StoredRollout { return &rsyncv1.StoredRollout{} }),
		states: store.NewRecords(st, ClusterStatesCollection, "rollout cluster state",
			func() *rsyncv1.StoredClusterState { return &rsyncv1.StoredClusterState{} }),
		sem:     make(chan struct{}, cfg.Concurrency),
		loaded:  make(chan struct{}),
		owners:  map[string]*owner{},
		workers: map[string]*worker{},
		claims:  map[string]map[string]string{},
	}
	e.shards = newShards(st, cfg)
	e.stamps = store.NewStamps(st, StampsCollection)
	e.saver = newStatusWriter(e.states, &e.mu, cfg.Checkpoint, &e.writes, log)
	e.saver.epoch = e.epochOf
	return e
}

// StoreWrites is how many store writes the engine made.
func (e *Engine) StoreWrites() int64 { return e.writes.Load() }

// Run loads the stored rollouts, resumes their work and runs until ctx
// ends; then it waits for the passes in flight and saves their state.
func (e *Engine) Run(ctx context.Context) error {
	if err := e.load(ctx); err != nil {
		return fmt.Errorf("rsync engine: load: %w", err)
	}
	defer e.gauges()() // gauges.go
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		e.saver.run(stop)
		close(stopped)
	}()
	// The leases outlive ctx until the states are saved, then are yielded.
	lctx, endLeases := context.WithCancel(context.Background())
	leasesDone := make(chan struct{})
	go func() {
		e.runLeases(lctx, ctx)
		close(leasesDone)
	}()
	go e.pollLoop(ctx)
	<-ctx.Done()
	e.running.Wait()
	close(stop)
	<-stopped
	endLeases()
	<-leasesDone
	return nil
}

// load reads every rollout and cluster state and starts the workers.
func (e *Engine) load(ctx context.Context) error {
	var recs []store.Item[*rsyncv1.StoredRollout]
	err := retryStore(ctx, func() (err error) {
		recs, err = e.rollouts.Children(ctx, "")
		return err
	})
	if err != nil {
		return err
	}
	all, err := e.states.All(ctx)
	if err != nil {
		return err
	}
	saved, stale := newest(all)
	e.dropStale(ctx, stale)
	byOwner := map[string][]savedState{}
	for _, s := range saved {
		byOwner[s.msg.GetOwner()] = append(byOwner[s.msg.GetOwner()], s)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ctx = ctx
	for _, it := range recs {
		rec := it.Msg
		o, err := e.newOwner(ctx, rec, it.Version)
		if err != nil {
			return err
		}
		var legacy []*task
		for _, st := range byOwner[rec.GetOwner()] {
			t := e.addTask(o, st.msg.GetProvider(), st.msg.GetCluster())
			if e.install(t, st) {
				legacy = append(legacy, t)
			}
		}
		e.owners[rec.GetOwner()] = o
		e.reconcile(o)
		for _, t := range o.tasks {
			t.resume()
		}
		restampAll(legacy)
	}
	e.indexClaims()
	for _, o := range e.owners {
		e.kickAll(o)
	}
	close(e.loaded)
	e.log.Info("rsync engine started", zap.Int("rollouts", len(e.owners)), zap.Int("clusters", len(e.workers)))
	return nil
}

// retryStore retries f while the store is unavailable (rsync may start
// before it).
func retryStore(ctx context.Context, f func() error) error {
	delay := 100 * time.Millisecond
	for {
		err := f()
		if err == nil || errs.Code(err) != codes.Unavailable {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
			delay = min(2*delay, 2*time.Second)
		}
	}
}

// newOwner makes the owner of a stored rollout, opening its sealed
// manifests.
func (e *Engine) newOwner(ctx context.Context, rec *rsyncv1.StoredRollout, version int64) (*owner, error) {
	o := &owner{rec: rec, version: version, tasks: map[string]*task{}, changed: make(chan struct{})}
	manifests, sensitive, err := e.openManifests(ctx, rec)
	if err != nil {
		return nil, err
	}
	for i, m := range manifests {
		obj, err := parseResource(fmt.Sprintf("manifests[%d]", i), m, sensitive[i])
		if err != nil {
			return nil, fmt.Errorf("stored rollout %q: %w", rec.GetOwner(), err)
		}
		o.objs = append(o.objs, obj)
	}
	return o, nil
}

func clusterKey(provider, cluster string) string { return provider + "/" + cluster }

// addTask returns o's task on a cluster, making it and the cluster's
// worker if needed. Called with mu held.
func (e *Engine) addTask(o *owner, provider, cluster string) *task {
	key := clusterKey(provider, cluster)
	if t, ok := o.tasks[key]; ok {
		return t
	}
	t := &task{owner: o, provider: provider, cluster: cluster, state: &rsyncv1.StoredClusterState{
		Owner: o.rec.GetOwner(), Provider: provider, Cluster: cluster, OwnershipRecorded: true,
	}}
	o.tasks[key] = t
	w, ok := e.workers[key]
	if !ok {
		w = &worker{kick: make(chan struct{}, 1), shard: shardOf(key, e.shards.n)}
		e.workers[key] = w
		e.running.Add(1)
		go e.work(w)
		if sl := e.active(w.shard); sl != nil {
			e.startDrift(sl.ctx, provider, cluster) // drift: watched while the shard is held (driftwatch.go)
		}
	}
	w.tasks = append(w.tasks, t)
	return t
}

// kickAll wakes the workers of o's clusters. Called with mu held.
func (e *Engine) kickAll(o *owner) {
	for key := range o.tasks {
		select {
		case e.workers[key].kick <- struct{}{}:
		default:
		}
	}
}

// notify wakes o's status watchers. Called with mu held.
func (o *owner) notify() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// sortedTasks lists o's tasks by cluster key. Called with mu held.
func (o *owner) sortedTasks() []*task {
	keys := make([]string, 0, len(o.tasks))
	for k := range o.tasks {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*task, len(keys))
	for i, k := range keys {
		out[i] = o.tasks[k]
	}
	return out
}

func schemaGVK(apiVersion, kind string) schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(apiVersion)
	return gv.WithKind(kind)
}

// isGone says whether a Get's error means the object is not there: not
// found, or its kind is no longer served (its CRD was deleted).
func isGone(err error) bool { return apierrors.IsNotFound(err) || meta.IsNoMatchError(err) }
