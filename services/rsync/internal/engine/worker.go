package engine

import (
	"math/rand/v2"
	"time"
)

// Workers: a goroutine per cluster runs the passes of that cluster's tasks,
// taking turns, under the engine's global concurrency bound (sem), and
// sleeps until the next retry is due or it is kicked.

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
func (e *Engine) work(w *worker) {
	defer e.running.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		e.mu.Lock()
		var t *task
		wait := time.Hour // until kicked: the shard is another replica's
		sl := e.active(w.shard)
		if sl != nil {
			t, wait = e.due(w, time.Now())
		}
		if t != nil {
			sl.passes.Add(1)
		}
		ctx := e.ctx
		e.mu.Unlock()
		if t != nil {
			select {
			case e.sem <- struct{}{}:
			case <-ctx.Done():
				sl.passes.Done()
				return
			}
			e.pass(sl.ctx, t)
			<-e.sem
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
