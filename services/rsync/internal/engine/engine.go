package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
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
}

func (c *Config) defaults() {
	if c.Concurrency <= 0 {
		c.Concurrency = 32
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
}

// Engine applies owners' rollouts to clusters. All of its in-memory state
// is guarded by mu; a worker goroutine per cluster runs the passes.
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
	// flushq is the store writer's queue of tasks whose state changed.
	flushq    []*task
	queued    map[*task]bool
	flushKick chan struct{}
	writing   bool
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
}

// task is one owner on one cluster.
type task struct {
	owner             *owner
	provider, cluster string
	state             *rsyncv1.StoredClusterState // observed
	desired           map[string]*object          // by key, for apply
	stateVersion      int64                       // 0: not stored yet
	dirty             bool
	lastFlush         time.Time
	next              time.Time // due then (zero: now)
	cancel            context.CancelFunc
}

// worker runs the passes of one cluster's tasks.
type worker struct {
	kick  chan struct{}
	tasks []*task
	turn  int
}

// New makes an engine over st. Run starts it.
func New(st *store.Store, connect Connector, cfg Config, log *zap.Logger) *Engine {
	cfg.defaults()
	return &Engine{
		cfg: cfg, log: log, connect: connect,
		rollouts: store.NewRecords(st, "rollouts", "rollout", func() *rsyncv1.StoredRollout { return &rsyncv1.StoredRollout{} }),
		states: store.NewRecords(st, "rollout_clusters", "rollout cluster state",
			func() *rsyncv1.StoredClusterState { return &rsyncv1.StoredClusterState{} }),
		sem:       make(chan struct{}, cfg.Concurrency),
		loaded:    make(chan struct{}),
		owners:    map[string]*owner{},
		workers:   map[string]*worker{},
		claims:    map[string]map[string]string{},
		queued:    map[*task]bool{},
		flushKick: make(chan struct{}, 1),
	}
}

// StoreWrites is how many store writes the engine made.
func (e *Engine) StoreWrites() int64 { return e.writes.Load() }

// Run loads the stored rollouts, resumes their work and runs until ctx
// ends; then it waits for the passes in flight and saves their state.
func (e *Engine) Run(ctx context.Context) error {
	if err := e.load(ctx); err != nil {
		return fmt.Errorf("rsync engine: load: %w", err)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		e.writer(stop)
		close(stopped)
	}()
	<-ctx.Done()
	e.running.Wait()
	close(stop)
	<-stopped
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
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ctx = ctx
	for _, it := range recs {
		rec := it.Msg
		o, err := newOwner(rec, it.Version)
		if err != nil {
			return err
		}
		states, err := e.states.Children(ctx, rec.GetOwner())
		if err != nil {
			return err
		}
		var legacy []*task
		for _, st := range states {
			t := e.addTask(o, st.Msg.GetProvider(), st.Msg.GetCluster())
			t.state, t.stateVersion = st.Msg, st.Version
			if !t.state.GetOwnershipRecorded() {
				legacy = append(legacy, t)
				adoptLegacy(t.state)
			}
		}
		e.owners[rec.GetOwner()] = o
		e.reconcile(o)
		for _, t := range o.tasks {
			// Retries resume when they were due; the rest now.
			t.next = time.Time{}
			for _, r := range t.state.GetResources() {
				if r.GetState() == rsyncv1.State_STATE_RETRYING && r.GetNextRetry().AsTime().After(t.next) {
					t.next = r.GetNextRetry().AsTime()
				}
			}
			t.dirty = false
		}
		for _, t := range legacy {
			if !rec.GetStopped() { // a stopped rollout is stamped when it resumes
				restamp(t.state)
			}
			t.next, t.dirty = time.Time{}, true
		}
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

func newOwner(rec *rsyncv1.StoredRollout, version int64) (*owner, error) {
	o := &owner{rec: rec, version: version, tasks: map[string]*task{}, changed: make(chan struct{})}
	for i, m := range rec.GetManifests() {
		obj, err := parseManifest(fmt.Sprintf("manifests[%d]", i), m)
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
		w = &worker{kick: make(chan struct{}, 1)}
		e.workers[key] = w
		e.running.Add(1)
		go e.work(w)
	}
	w.tasks = append(w.tasks, t)
	return t
}

// reconcile brings every task of o to o's generation: what to apply, what
// to delete. Called with mu held, after o.rec changed or on load.
func (e *Engine) reconcile(o *owner) {
	targets := map[string]*rsyncv1.StoredTarget{}
	for _, tg := range o.rec.GetTargets() {
		targets[clusterKey(tg.GetProvider(), tg.GetCluster())] = tg
		e.addTask(o, tg.GetProvider(), tg.GetCluster())
	}
	for key, t := range o.tasks {
		var want []*object
		if tg, ok := targets[key]; ok && !o.rec.GetDeleting() {
			for _, i := range tg.GetManifests() {
				want = append(want, o.objs[i])
			}
		}
		t.reconcile(o.rec.GetGeneration(), applyOrder(want))
	}
}

// reconcile sets t's resources for generation gen: want in order (to
// apply), then the others it still has (to delete). Entries already at gen
// (loaded after a restart) are kept as they are, retry schedule included;
// an entry applied from the same manifest stays applied: unchanged
// resources are not applied again.
func (t *task) reconcile(gen int64, want []*object) {
	old := map[string]*rsyncv1.ResourceStatus{}
	for _, r := range t.state.GetResources() {
		old[keyOf(r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName())] = r
	}
	now := timestamppb.Now()
	reset := func(r *rsyncv1.ResourceStatus, op rsyncv1.Operation) {
		r.Operation, r.State, r.Attempts, r.NextRetry, r.LastError, r.Updated =
			op, rsyncv1.State_STATE_PENDING, 0, nil, "", now
	}
	t.desired = map[string]*object{}
	var res []*rsyncv1.ResourceStatus
	for _, obj := range want {
		t.desired[obj.key] = obj
		r, ok := old[obj.key]
		delete(old, obj.key)
		switch {
		case !ok:
			r = &rsyncv1.ResourceStatus{}
			reset(r, rsyncv1.Operation_OPERATION_APPLY)
		case r.GetGeneration() == gen && r.GetManifestHash() == obj.hash:
		case r.GetOperation() == rsyncv1.Operation_OPERATION_APPLY && r.GetState() == rsyncv1.State_STATE_APPLIED &&
			r.GetManifestHash() == obj.hash:
		default:
			reset(r, rsyncv1.Operation_OPERATION_APPLY)
		}
		// A new apiVersion of the same object is what the next apply sends.
		r.ApiVersion, r.Kind, r.Namespace, r.Name = obj.u.GetAPIVersion(), obj.u.GetKind(), obj.u.GetNamespace(), obj.u.GetName()
		r.ManifestHash, r.Generation = obj.hash, gen
		res = append(res, r)
	}
	for _, r := range t.state.GetResources() {
		if _, dropped := old[keyOf(r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName())]; !dropped {
			continue
		}
		deleted := r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE && r.GetState() == rsyncv1.State_STATE_DELETED
		switch {
		case r.GetGeneration() == gen:
		case deleted && len(want) > 0:
			continue // deleted by an earlier generation: no longer shown
		case deleted:
		case r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE && r.GetState() != rsyncv1.State_STATE_FAILED:
			// a delete still under way keeps its retry count
		default:
			reset(r, rsyncv1.Operation_OPERATION_DELETE)
		}
		r.Generation = gen
		res = append(res, r)
	}
	t.state.Resources = res
	t.dirty = true
	t.next = time.Time{}
	if t.cancel != nil {
		t.cancel() // a pass of an older generation stops at its next step
	}
}

// done says whether r needs no more work at generation gen.
func done(r *rsyncv1.ResourceStatus, gen int64) bool {
	switch r.GetState() {
	case rsyncv1.State_STATE_APPLIED:
		return r.GetOperation() == rsyncv1.Operation_OPERATION_APPLY
	case rsyncv1.State_STATE_DELETED:
		return r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE
	case rsyncv1.State_STATE_FAILED:
		return r.GetGeneration() == gen
	default:
		return false
	}
}

// nextStep is the index of t's next resource to work on: applies in
// order, then deletes in reverse order; -1 when none is left.
func (t *task) nextStep(gen int64) int {
	res := t.state.GetResources()
	for i, r := range res {
		if r.GetOperation() == rsyncv1.Operation_OPERATION_APPLY && !done(r, gen) {
			return i
		}
	}
	for i := len(res) - 1; i >= 0; i-- {
		if r := res[i]; r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE && !done(r, gen) {
			return i
		}
	}
	return -1
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

// work runs one cluster's tasks: each due task gets a pass, under the
// global concurrency bound; then it sleeps until the next retry is due or
// it is kicked.
func (e *Engine) work(w *worker) {
	defer e.running.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		e.mu.Lock()
		t, wait := e.due(w, time.Now())
		ctx := e.ctx
		e.mu.Unlock()
		if t != nil {
			select {
			case e.sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			e.pass(ctx, t)
			<-e.sem
			continue
		}
		timer.Reset(wait)
		select {
		case <-w.kick:
		case <-timer.C:
		case <-ctx.Done():
			return
		}
	}
}

// due picks w's next task with work due, taking turns; else how long until
// one is. Called with mu held.
func (e *Engine) due(w *worker, now time.Time) (*task, time.Duration) {
	wait := time.Hour
	for i := range w.tasks {
		t := w.tasks[(w.turn+i)%len(w.tasks)]
		if t.owner.rec.GetStopped() || t.nextStep(t.owner.rec.GetGeneration()) < 0 {
			continue
		}
		if !t.next.After(now) {
			w.turn = (w.turn + i + 1) % len(w.tasks)
			return t, 0
		}
		wait = min(wait, t.next.Sub(now))
	}
	return nil, wait
}

// backoff is the delay before attempt n+1: base doubling per attempt,
// capped, drawn from the upper half so that clusters that failed together
// do not retry together.
func (e *Engine) backoff(attempts int) time.Duration {
	d := e.cfg.RetryMax
	if attempts < 32 {
		d = min(e.cfg.RetryBase<<max(attempts-1, 0), e.cfg.RetryMax)
	}
	return d/2 + rand.N(d/2+1)
}

// flush queues t's state for the store writer if it changed, at most once
// per checkpoint interval unless force. Called without mu.
func (e *Engine) flush(t *task, force bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !t.dirty || e.queued[t] || (!force && time.Since(t.lastFlush) < e.cfg.Checkpoint) {
		return
	}
	t.lastFlush = time.Now()
	e.queued[t] = true
	e.flushq = append(e.flushq, t)
	select {
	case e.flushKick <- struct{}{}:
	default:
	}
}

// writer writes queued states to the store one at a time, each task's
// latest state once however often it changed while queued: the store (the
// embedded one scans a collection per write) sees one engine write at a
// time, and fewer the slower it is. The state in memory stays
// authoritative; a write that fails is queued again. Once stop is closed
// it writes what is left and returns, for a graceful stop.
func (e *Engine) writer(stop <-chan struct{}) {
	for {
		e.mu.Lock()
		if len(e.flushq) == 0 {
			e.mu.Unlock()
			select {
			case <-e.flushKick:
				continue
			case <-stop:
			}
			if e.drained() {
				return
			}
			continue
		}
		t := e.flushq[0]
		e.flushq = e.flushq[1:]
		delete(e.queued, t)
		snap := proto.CloneOf(t.state)
		version := t.stateVersion
		t.dirty = false
		e.writing = true
		e.mu.Unlock()

		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		id := store.Key(snap.GetOwner(), snap.GetProvider(), snap.GetCluster())
		var err error
		if version == 0 {
			err = e.states.Create(wctx, id, snap.GetOwner(), snap)
		} else {
			err = e.states.Update(wctx, id, version, snap)
		}
		cancel()
		e.writes.Add(1)
		e.mu.Lock()
		e.writing = false
		if err == nil {
			storeWrites.WithLabelValues("ok").Inc()
			t.stateVersion = version + 1
			e.mu.Unlock()
			continue
		}
		storeWrites.WithLabelValues("error").Inc()
		t.dirty = true
		if !e.queued[t] {
			e.queued[t] = true
			e.flushq = append(e.flushq, t)
		}
		e.mu.Unlock()
		e.log.Warn("save rollout cluster state; will retry", zap.String("id", id), zap.Error(err))
		select {
		case <-time.After(time.Second):
		case <-stop:
			return // the store is failing: what is not saved is redone after a restart
		}
	}
}

// Unsaved counts the cluster states waiting for the store writer.
func (e *Engine) Unsaved() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(e.flushq)
	if e.writing {
		n++
	}
	return n
}

// drained says whether the stopping writer has nothing left to write.
func (e *Engine) drained() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.flushq) == 0
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
