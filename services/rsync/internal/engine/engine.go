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

// Engine applies owners' rollouts to clusters. It is the composition
// root of the parts, each a type of its own holding only what it uses:
// the API the gRPC service calls (api, api.go), the shard leases
// (shards, shards.go), the replicas' view of the store (replicas,
// replicas.go, purge.go), the applying of rollouts on clusters (applier:
// worker.go, reconcile.go, pass.go, step.go), drift (driftWatcher:
// driftwatch.go, driftrecord.go) and the store writer of cluster states
// (statusWriter: statuswriter.go, trace.go). They share the in-memory
// state on a board, guarded by its mu.
type Engine struct {
	*api
	board    *board
	shards   *shards
	replicas *replicas
	saver    *statusWriter
	stager   *stager
	// writes counts store writes (the benchmark reports them per cluster).
	writes atomic.Int64
}

// board is the in-memory state the parts share, guarded by mu: the
// rollouts (owners), the workers of the clusters and rsync's claims.
type board struct {
	mu      sync.Mutex
	ctx     context.Context
	owners  map[string]*owner
	workers map[string]*worker
	// claims is rsync's record of who owns what on each cluster: by
	// cluster key, the owner of each object (by key) it applied for that
	// owner and has not deleted; the owned flags of the tasks' resources,
	// indexed (owner.go).
	claims map[string]map[string]string
	// running counts the goroutines of the workers and drift watches.
	running sync.WaitGroup
	// loaded is closed once the stored state is loaded.
	loaded chan struct{}
	// apiMu serializes the changes of desired state (the API's, the
	// adoption of other replicas' and purges).
	apiMu sync.Mutex
	log   *zap.Logger
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
	// waiting are the clusters not yet admitted to rec's generation by
	// its progressive strategy, as of gatedGen (stages.go).
	waiting  map[string]bool
	gatedGen int64
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
	rollouts := store.NewRecords(st, RolloutsCollection, "rollout", func() *rsyncv1.StoredRollout { return &rsyncv1.StoredRollout{} })
	states := store.NewRecords(st, ClusterStatesCollection, "rollout cluster state",
		func() *rsyncv1.StoredClusterState { return &rsyncv1.StoredClusterState{} })
	stamps := store.NewStamps(st, StampsCollection)
	b := &board{
		loaded: make(chan struct{}), owners: map[string]*owner{}, workers: map[string]*worker{},
		claims: map[string]map[string]string{}, log: log,
	}
	e := &Engine{board: b, shards: newShards(st, cfg, &b.mu, log)}
	e.saver = newStatusWriter(states, &b.mu, cfg.Checkpoint, &e.writes, log)
	e.saver.epoch = e.shards.epochOf
	drift := &driftWatcher{board: b, connect: connect, interval: cfg.DriftInterval}
	applier := &applier{
		board: b, connect: connect, sem: make(chan struct{}, cfg.Concurrency),
		shards: e.shards, saver: e.saver, drift: drift,
		retryBase: cfg.RetryBase, retryMax: cfg.RetryMax, forceConflicts: cfg.ForceConflicts,
		certificateWait: cfg.CertificateWait, deleteWait: cfg.DeleteWait,
	}
	e.replicas = &replicas{
		board: b, rollouts: rollouts, states: states, stamps: stamps, shards: e.shards,
		applier: applier, drift: drift, saver: e.saver, pollEvery: cfg.Poll, purgeAfter: cfg.PurgeAfter,
	}
	e.shards.take = e.replicas.activate
	e.stager = &stager{board: b, replicas: e.replicas, shards: e.shards, every: min(cfg.Poll, 250*time.Millisecond)}
	e.api = &api{
		board: b, connect: connect, rollouts: rollouts, stamps: stamps,
		replicas: e.replicas, shards: e.shards, saver: e.saver, writes: &e.writes,
	}
	e.stager.api = e.api
	return e
}

// StoreWrites is how many store writes the engine made.
func (e *Engine) StoreWrites() int64 { return e.writes.Load() }

// Run loads the stored rollouts, resumes their work and runs until ctx
// ends; then it waits for the passes in flight and saves their state.
func (e *Engine) Run(ctx context.Context) error {
	if err := e.replicas.load(ctx); err != nil {
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
		e.shards.runLeases(lctx, ctx)
		close(leasesDone)
	}()
	go e.replicas.pollLoop(ctx)
	go e.stager.run(ctx) // stages.go
	<-ctx.Done()
	e.board.running.Wait()
	close(stop)
	<-stopped
	endLeases()
	<-leasesDone
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

func clusterKey(provider, cluster string) string { return provider + "/" + cluster }

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
