package engine

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/store"
)

// statusWriter is the engine's single store writer of cluster states. It
// writes queued states to the store one at a time, each task's latest state
// once however often it changed while queued: the store (the embedded one
// scans a collection per write) sees one engine write at a time, and fewer
// the slower it is. The state in memory stays authoritative; a write that
// fails is queued again.
//
// Its queue is guarded by its own mu. A task's state, version and dirty
// flag stay guarded by the engine's lock (tasks); when both are needed,
// tasks is taken first.
type statusWriter struct {
	states *store.Records[*rsyncv1.StoredClusterState]
	tasks  sync.Locker // the engine's mu
	// checkpoint is how often a long pass's state is queued at most.
	checkpoint time.Duration
	writes     *atomic.Int64 // the engine's count of store writes
	log        *zap.Logger
	kick       chan struct{}
	// epoch is the epoch of the shard lease a task's state is written
	// under; false when the replica no longer holds the shard (the state
	// is then not written: its new holder writes it). Called with tasks
	// held.
	epoch func(*task) (int64, bool)

	mu     sync.Mutex
	q      []*task
	queued map[*task]bool
	// current is the task whose state is being written, nil when none.
	current *task
	// gate is read-held around each write; a test holds the writes by
	// taking it (HoldSaves).
	gate sync.RWMutex
}

func newStatusWriter(states *store.Records[*rsyncv1.StoredClusterState], tasks sync.Locker, checkpoint time.Duration, writes *atomic.Int64, log *zap.Logger) *statusWriter {
	return &statusWriter{
		states: states, tasks: tasks, checkpoint: checkpoint, writes: writes, log: log,
		kick: make(chan struct{}, 1), queued: map[*task]bool{},
	}
}

// flush queues t's state for the store writer if it changed, at most once
// per checkpoint interval unless force. Called without the engine's mu.
func (w *statusWriter) flush(t *task, force bool) {
	w.tasks.Lock()
	defer w.tasks.Unlock()
	w.flushLocked(t, force)
}

// flushLocked is flush called with the engine's mu held: a pass that ends
// queues its state before it tells the watchers, so that no status read in
// between shows it settled and unsaved (saved).
func (w *statusWriter) flushLocked(t *task, force bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !t.dirty || w.queued[t] || (!force && time.Since(t.lastFlush) < w.checkpoint) {
		return
	}
	if _, ok := w.epoch(t); !ok {
		return
	}
	t.lastFlush = time.Now()
	w.enqueue(t)
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// enqueue adds t to the queue. Called with w.mu held.
func (w *statusWriter) enqueue(t *task) {
	w.queued[t] = true
	w.q = append(w.q, t)
}

// next takes the first queued task and a snapshot of its state to write,
// stamped with its shard's epoch, or nil if the queue is empty. A task
// whose shard this replica lost is passed over.
func (w *statusWriter) next() (t *task, snap *rsyncv1.StoredClusterState, version int64, prev string) {
	w.tasks.Lock()
	defer w.tasks.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.q) > 0 {
		t = w.q[0]
		w.q = w.q[1:]
		delete(w.queued, t)
		epoch, ok := w.epoch(t)
		if !ok {
			continue
		}
		snap = proto.CloneOf(t.state)
		snap.Epoch = epoch
		version, prev = t.stateVersion, t.stateID
		t.dirty = false
		w.current = t
		return t, snap, version, prev
	}
	return nil, nil, 0, ""
}

// written records the result of writing t's state: the seq and id of its
// save in the store.
func (w *statusWriter) written(t *task, version int64, id string, err error) {
	w.tasks.Lock()
	defer w.tasks.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.current = nil
	if err == nil {
		storeWrites.WithLabelValues("ok").Inc()
		t.stateVersion, t.stateID = version, id
		t.owner.notify() // a watcher waiting for it to be saved (saved)
		return
	}
	storeWrites.WithLabelValues("error").Inc()
	t.dirty = true
	if !w.queued[t] {
		w.enqueue(t)
	}
}

// run writes queued states until stop is closed; then it writes what is
// left and returns, for a graceful stop.
func (w *statusWriter) run(stop <-chan struct{}) {
	for {
		t, snap, version, prev := w.next()
		if t == nil {
			select {
			case <-w.kick:
				continue
			case <-stop:
			}
			if w.drained() {
				return
			}
			continue
		}

		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		w.gate.RLock()
		version, id, err := w.write(wctx, snap, version, prev)
		w.gate.RUnlock()
		cancel()
		w.written(t, version, id, err)
		if err == nil {
			continue
		}
		w.log.Warn("save rollout cluster state; will retry", zap.String("id", store.Key(snap.GetOwner(), snap.GetProvider(), snap.GetCluster())), zap.Error(err))
		select {
		case <-time.After(time.Second):
		case <-stop:
			return // the store is failing: what is not saved is redone after a restart
		}
	}
}

// saved says whether every state of o this replica queued for the store
// is written: what it shows of its own clusters is then what the other
// replicas read of them, and a status is not reported settled before
// that (api.report), or one replica could answer a settled rollout that
// another, reading the store a moment later, still shows under way; nor
// is a deleted rollout purged (purge.go). Called with tasks held.
func (w *statusWriter) saved(o *owner) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.current != nil && w.current.owner == o {
		return false
	}
	for t := range w.queued {
		if t.owner == o {
			return false
		}
	}
	return true
}

// forget drops t from the queue (its owner was purged). Called with tasks
// held.
func (w *statusWriter) forget(t *task) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queued[t] {
		delete(w.queued, t)
		w.q = slices.DeleteFunc(w.q, func(x *task) bool { return x == t })
	}
}

// unsaved counts the states queued or being written.
func (w *statusWriter) unsaved() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.q)
	if w.current != nil {
		n++
	}
	return n
}

// drained says whether the stopping writer has nothing left to write.
func (w *statusWriter) drained() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.q) == 0
}

// Unsaved counts the cluster states waiting for the store writer.
func (e *Engine) Unsaved() int { return e.saver.unsaved() }
