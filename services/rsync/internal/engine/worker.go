package engine

import (
	"math/rand/v2"
	"time"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// Workers: a goroutine per cluster runs the passes of that cluster's tasks,
// taking turns, under the engine's global concurrency bound (sem), and
// sleeps until the next retry is due or it is kicked.

// applier applies the rollouts on the clusters: it reconciles each task
// with its owner's generation (reconcile.go), runs a worker per cluster
// (here) whose passes (pass.go) take the steps (step.go), and records
// their outcomes on the board.
type applier struct {
	*board
	connect Connector
	// sem bounds how many clusters are worked on at once
	// (Config.Concurrency).
	sem    chan struct{}
	shards *shards
	saver  *statusWriter
	drift  *driftWatcher
	// Config's settings of the steps and their retries.
	retryBase, retryMax         time.Duration
	forceConflicts              bool
	certificateWait, deleteWait time.Duration
}

// worker runs the passes of one cluster's tasks.
type worker struct {
	kick  chan struct{}
	tasks []*task
	turn  int
	shard int // the cluster's shard: worked only while its lease is held
}

// work runs one cluster's tasks: each due task gets a pass, under the
// global concurrency bound; then it sleeps until the next retry is due or
// it is kicked.
func (p *applier) work(w *worker) {
	defer p.running.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		var t *task
		wait := time.Hour // until kicked: the shard is another replica's
		sl := p.shards.active(w.shard)
		if sl != nil {
			t, wait = p.due(w, time.Now())
		}
		if t != nil {
			sl.passes.Add(1)
		}
		ctx := p.ctx
		p.mu.Unlock()
		if t != nil {
			select {
			case p.sem <- struct{}{}:
			case <-ctx.Done():
				sl.passes.Done()
				return
			}
			p.pass(sl.ctx, t)
			<-p.sem
			sl.passes.Done()
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
func (p *applier) due(w *worker, now time.Time) (*task, time.Duration) {
	wait := time.Hour
	for i := range w.tasks {
		t := w.tasks[(w.turn+i)%len(w.tasks)]
		if t.owner.rec.GetStopped() || t.owner.waiting[clusterKey(t.provider, t.cluster)] || t.nextStep(t.owner.rec.GetGeneration()) < 0 {
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
func (p *applier) backoff(attempts int) time.Duration {
	d := p.retryMax
	if attempts < 32 {
		d = min(p.retryBase<<max(attempts-1, 0), p.retryMax)
	}
	return d/2 + rand.N(d/2+1)
}

// addTask returns o's task on a cluster, making it and the cluster's
// worker if needed. Called with mu held.
func (p *applier) addTask(o *owner, provider, cluster string) *task {
	key := clusterKey(provider, cluster)
	if t, ok := o.tasks[key]; ok {
		return t
	}
	t := &task{owner: o, provider: provider, cluster: cluster, state: &rsyncv1.StoredClusterState{
		Owner: o.rec.GetOwner(), Provider: provider, Cluster: cluster, OwnershipRecorded: true,
	}}
	o.tasks[key] = t
	w, ok := p.workers[key]
	if !ok {
		w = &worker{kick: make(chan struct{}, 1), shard: shardOf(key, p.shards.n)}
		p.workers[key] = w
		p.running.Add(1)
		go p.work(w)
		if sl := p.shards.active(w.shard); sl != nil {
			p.drift.start(sl.ctx, provider, cluster) // drift: watched while the shard is held (driftwatch.go)
		}
	}
	w.tasks = append(w.tasks, t)
	return t
}

// kickAll wakes the workers of o's clusters. Called with mu held.
func (p *applier) kickAll(o *owner) {
	for key := range o.tasks {
		select {
		case p.workers[key].kick <- struct{}{}:
		default:
		}
	}
}
