package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Staged rollouts. A rollout whose strategy is progressive gives each new
// generation to its clusters in waves: in its order (the request's
// clusters as given, then the clusters the generation drops, by key), at
// most max_concurrency clusters at a time. The clusters not yet admitted
// keep the previous generation: their tasks are neither reconciled nor
// worked on, so their objects and their status stay as they were.
//
// The wave state is part of the rollout record (StoredRollout.progress),
// written like any change (optimistic concurrency on the record), so it
// survives restarts and replica takeovers. One replica advances a
// rollout's waves: the one holding the shard of the owner's id (stager);
// it reads the other replicas' saved cluster states as Status does.
//
// A wave ends when each of its clusters settled: applied, or failed (a
// resource FAILED at the generation, or one still retrying after
// failAttempts attempts). The next wave starts soak after the wave ended.
// Once more clusters failed than max_failures (failures forgiven by a
// resume left out), the rollout pauses: no more clusters are admitted
// until ResumeRollout. RollbackRollout makes the previous generation's
// desired state (kept in the record while the strategy is progressive) a
// new generation, given to every cluster at once. A deletion always goes
// to every cluster at once.

// failAttempts is how many attempts a resource may retry before its
// cluster counts as failed for the waves (with the default retry base of
// a second, about 15 s of retries). It goes on retrying all the same.
const failAttempts = 5

// previousSecret names the rollout record's sealed secret that holds the
// previous generation's sensitive manifests.
const previousSecret = "previous-sensitive"

// changeMode says what a change makes of the generation.
type changeMode int

const (
	// changeNew: a new generation (submit, update, delete), staged by the
	// strategy.
	changeNew changeMode = iota
	// changeKeep: the same generation (a wave's progress, a resume).
	changeKeep
	// changeRollback: a new generation given to every cluster at once.
	changeRollback
)

// clusterOrder is the order o's clusters are given a generation in:
// rec's targets as given, then the clusters it drops (o's other tasks),
// by key. Called with mu held (tasks nil: none).
func clusterOrder(rec *rsyncv1.StoredRollout, tasks map[string]*task) []string {
	out := make([]string, 0, len(rec.GetTargets()))
	targeted := map[string]bool{}
	for _, tg := range rec.GetTargets() {
		k := clusterKey(tg.GetProvider(), tg.GetCluster())
		targeted[k] = true
		out = append(out, k)
	}
	var dropped []string
	for k := range tasks {
		if !targeted[k] {
			dropped = append(dropped, k)
		}
	}
	slices.Sort(dropped)
	return append(out, dropped...)
}

// gate sets o.waiting: the clusters not yet admitted to o's generation.
// Called with mu held, as reconcile starts.
func gate(o *owner) {
	o.waiting, o.gatedGen = nil, o.rec.GetGeneration()
	p := o.rec.GetProgress()
	if p == nil || o.rec.GetDeleting() {
		return
	}
	keys := clusterOrder(o.rec, o.tasks)
	if int(p.GetAdmitted()) >= len(keys) {
		return
	}
	o.waiting = map[string]bool{}
	for _, k := range keys[p.GetAdmitted():] {
		o.waiting[k] = true
	}
}

// stage prepares the record of a new generation: with a progressive
// strategy, its progress (the first wave admitted) and the previous
// generation's desired state (for a rollback: the last one that reached
// every cluster, when the current one did not); a rollback or a deletion
// goes to every cluster at once and keeps no previous state. It answers
// the sealed secret of the previous generation's sensitive manifests, if
// any. Called under apiMu.
func (a *api) stage(o *owner, rec *rsyncv1.StoredRollout, mode changeMode) (*store.Secret, error) {
	rec.Progress, rec.Previous = nil, nil
	st := rec.GetStrategy()
	if !st.GetProgressive() || rec.GetDeleting() || mode == changeRollback {
		return nil, nil
	}
	var tasks map[string]*task
	if o != nil {
		tasks = o.tasks
	}
	a.mu.Lock()
	total := len(clusterOrder(rec, tasks))
	a.mu.Unlock()
	rec.Progress = &rsyncv1.RolloutProgress{Wave: 1, Total: int32(total), Admitted: int32(min(total, waveSize(st)))}
	if o == nil || o.rec.GetDeleting() {
		return nil, nil
	}
	if p := o.rec.GetProgress(); p != nil && (p.GetPaused() || p.GetAdmitted() < p.GetTotal()) {
		// The current generation did not reach every cluster: the previous
		// stays the one before it (what the clusters not reached hold),
		// its sealed manifests as stored.
		rec.Previous = o.rec.GetPrevious()
		return nil, nil
	}
	prev := o.rec
	rec.Previous = &rsyncv1.StoredPrevious{Generation: prev.GetGeneration(), Manifests: prev.GetManifests(), Targets: prev.GetTargets(), Sealed: prev.GetSealed()}
	if len(prev.GetSealed()) == 0 {
		return nil, nil
	}
	sec, err := sealedManifests(prev, o.objs)
	if err != nil {
		return nil, err
	}
	sec.Name = previousSecret
	return &sec, nil
}

// finishIdle finishes the generation of an admitted task that has nothing
// to do (its cluster holds the generation already), and queues its state,
// so that its wave settles on every replica without a pass. Called with mu
// held, after t was reconciled.
func (p *applier) finishIdle(t *task) {
	gen := t.owner.rec.GetGeneration()
	if t.nextStep(gen) < 0 && t.state.GetGeneration() != gen {
		t.state.Generation = gen
		p.saver.flushLocked(t, true)
	}
}

// waveSize is how many clusters a wave of st admits.
func waveSize(st *rsyncv1.RolloutStrategy) int { return max(1, int(st.GetMaxConcurrency())) }

// SubmitStaged is SubmitGuest with a rollout strategy (nil: every cluster
// at once).
func (a *api) SubmitStaged(ctx context.Context, ownerID, host string, repair *bool, strategy *rsyncv1.RolloutStrategy, clusters []*rsyncv1.ClusterResources) (int64, error) {
	if err := checkStrategy(strategy); err != nil {
		return 0, err
	}
	return a.change(ctx, ownerID, func(o *owner) (*rsyncv1.StoredRollout, []*object, error) {
		if o != nil {
			a.mu.Lock()
			gone := o.rec.GetDeleting() && o.summary().GetSettled()
			a.mu.Unlock()
			if !gone {
				return nil, nil, errs.AlreadyExists("rollout %q exists: update or delete it", ownerID)
			}
		}
		rec, objs, err := a.buildGuest(ctx, ownerID, host, repair != nil && !*repair, clusters)
		if err != nil {
			return nil, nil, err
		}
		rec.Strategy = strategy
		return rec, objs, nil
	})
}

// UpdateStaged is UpdateGuest with a rollout strategy (nil: every cluster
// at once), which replaces the rollout's.
func (a *api) UpdateStaged(ctx context.Context, ownerID, host string, repair *bool, strategy *rsyncv1.RolloutStrategy, clusters []*rsyncv1.ClusterResources) (int64, error) {
	if err := checkStrategy(strategy); err != nil {
		return 0, err
	}
	return a.change(ctx, ownerID, func(o *owner) (*rsyncv1.StoredRollout, []*object, error) {
		if o == nil {
			return nil, nil, errs.NotFound("rollout %q not found", ownerID)
		}
		if o.rec.GetDeleting() {
			return nil, nil, errs.FailedPrecondition("rollout %q is deleted: submit it anew", ownerID)
		}
		reportOnly := o.rec.GetReportDriftOnly()
		if repair != nil {
			reportOnly = !*repair
		}
		rec, objs, err := a.buildGuest(ctx, ownerID, host, reportOnly, clusters)
		if err != nil {
			return nil, nil, err
		}
		rec.Strategy = strategy
		return rec, objs, nil
	})
}

// checkStrategy refuses a strategy the engine cannot follow (the API's
// validation bounds the numbers; this is what they cannot say).
func checkStrategy(st *rsyncv1.RolloutStrategy) error {
	if st.GetProgressive() && st.GetMaxConcurrency() < 1 {
		return errs.Invalid("strategy.max_concurrency", "must be at least 1 for a progressive rollout")
	}
	if d := st.GetSoak(); d != nil && (d.CheckValid() != nil || d.AsDuration() < 0) {
		return errs.Invalid("strategy.soak", "must be a duration of 0 or more")
	}
	return nil
}

// Resume continues ownerID's paused rollout: the failures so far no longer
// count toward max_failures (the failed clusters stay as they are until
// the next update). WRONG_STATE when it is not paused.
func (a *api) Resume(ctx context.Context, ownerID string) error {
	_, err := a.changeAs(ctx, ownerID, changeKeep, func(o *owner) (*rsyncv1.StoredRollout, []*object, error) {
		if o == nil {
			return nil, nil, errs.NotFound("rollout %q not found", ownerID)
		}
		if !o.rec.GetProgress().GetPaused() || o.rec.GetDeleting() {
			return nil, nil, errs.Because(errs.ReasonWrongState, "rollout %q is not paused: only a paused rollout is resumed", ownerID)
		}
		rec := proto.CloneOf(o.rec)
		p := rec.GetProgress()
		a.mu.Lock()
		failed := failedClusters(o)
		a.mu.Unlock()
		for _, k := range append(p.GetFailed(), failed...) {
			if !slices.Contains(p.GetForgiven(), k) {
				p.Forgiven = append(p.Forgiven, k)
			}
		}
		p.Paused, p.Failed, p.WaveSettled = false, nil, nil
		return rec, o.objs, nil
	})
	return err
}

// Rollback makes the previous generation's desired state ownerID's new
// generation, given to every cluster at once; the clusters a paused
// rollout never reached hold it already and are not changed. WRONG_STATE
// when no previous generation is kept (the strategy is not progressive,
// or it was rolled back already).
func (a *api) Rollback(ctx context.Context, ownerID string) (int64, error) {
	return a.changeAs(ctx, ownerID, changeRollback, func(o *owner) (*rsyncv1.StoredRollout, []*object, error) {
		if o == nil {
			return nil, nil, errs.NotFound("rollout %q not found", ownerID)
		}
		prev := o.rec.GetPrevious()
		if prev == nil || o.rec.GetDeleting() {
			return nil, nil, errs.Because(errs.ReasonWrongState, "rollout %q keeps no previous generation to roll back to", ownerID)
		}
		manifests, err := a.openPrevious(ctx, ownerID, prev)
		if err != nil {
			return nil, nil, err
		}
		rec := proto.CloneOf(o.rec)
		rec.Manifests, rec.Targets, rec.Sealed, rec.Stopped = prev.GetManifests(), prev.GetTargets(), prev.GetSealed(), false
		var objs []*object
		for i, m := range manifests {
			obj, err := parseResource(fmt.Sprintf("previous.manifests[%d]", i), m, slices.Contains(prev.GetSealed(), int32(i)))
			if err != nil {
				return nil, nil, errs.Internal(err, "rollout %q: its previous generation does not parse", ownerID)
			}
			objs = append(objs, obj)
		}
		for _, i := range prev.GetSealed() {
			rec.Manifests[i] = objs[i].hash
		}
		return rec, objs, nil
	})
}

// openPrevious answers prev's manifests, the sealed ones opened.
func (a *api) openPrevious(ctx context.Context, ownerID string, prev *rsyncv1.StoredPrevious) ([]string, error) {
	manifests := slices.Clone(prev.GetManifests())
	if len(prev.GetSealed()) == 0 {
		return manifests, nil
	}
	b, err := a.rollouts.Secret(ctx, ownerID, previousSecret)
	if err != nil {
		return nil, fmt.Errorf("rollout %q: open its previous sensitive manifests: %w", ownerID, err)
	}
	var texts []string
	if err := json.Unmarshal(b, &texts); err != nil || len(texts) != len(prev.GetSealed()) {
		return nil, errs.Internal(err, "rollout %q: its previous sealed manifests do not match the record", ownerID)
	}
	for j, i := range prev.GetSealed() {
		if int(i) >= len(manifests) {
			return nil, errs.Internal(nil, "rollout %q: previous sealed manifest index %d out of range", ownerID, i)
		}
		manifests[i] = texts[j]
	}
	return manifests, nil
}

// outcome of a cluster in a wave.
type waveOutcome int

const (
	wavePending waveOutcome = iota
	waveApplied
	waveFailed
)

// waveOutcomeOf is where t stands in generation gen's wave. Called with
// mu held.
func waveOutcomeOf(t *task, gen int64) waveOutcome {
	if t == nil {
		return wavePending
	}
	for _, r := range t.state.GetResources() {
		if r.GetGeneration() != gen {
			continue
		}
		if r.GetState() == rsyncv1.State_STATE_FAILED || r.GetState() == rsyncv1.State_STATE_RETRYING && r.GetAttempts() >= failAttempts {
			return waveFailed
		}
	}
	if t.state.GetGeneration() != gen {
		return wavePending
	}
	return waveApplied
}

// failedClusters lists o's admitted clusters that failed its generation,
// in order, forgiven ones left out. Called with mu held.
func failedClusters(o *owner) []string {
	p := o.rec.GetProgress()
	keys := clusterOrder(o.rec, o.tasks)
	var out []string
	for _, k := range keys[:min(len(keys), int(p.GetAdmitted()))] {
		if !slices.Contains(p.GetForgiven(), k) && waveOutcomeOf(o.tasks[k], o.rec.GetGeneration()) == waveFailed {
			out = append(out, k)
		}
	}
	return out
}

// nextProgress is o's progress after what its clusters did by now; nil
// when there is nothing to change. Called with mu held.
func nextProgress(o *owner, now time.Time) *rsyncv1.RolloutProgress {
	p, st, gen := o.rec.GetProgress(), o.rec.GetStrategy(), o.rec.GetGeneration()
	keys := clusterOrder(o.rec, o.tasks)
	admitted := min(len(keys), int(p.GetAdmitted()))
	var failed []string
	settled := true
	for _, k := range keys[:admitted] {
		switch waveOutcomeOf(o.tasks[k], gen) {
		case waveFailed:
			if !slices.Contains(p.GetForgiven(), k) {
				failed = append(failed, k)
			}
		case wavePending:
			settled = false
		}
	}
	next := proto.CloneOf(p)
	if len(failed) > int(st.GetMaxFailures()) {
		next.Paused, next.Failed = true, failed
		return next
	}
	if !settled || admitted >= len(keys) {
		return nil
	}
	if p.GetWaveSettled() == nil {
		next.WaveSettled = timestamppb.New(now)
		if st.GetSoak().AsDuration() > 0 {
			return next // the soak starts
		}
	} else if now.Before(p.GetWaveSettled().AsTime().Add(st.GetSoak().AsDuration())) {
		return nil
	}
	next.Admitted, next.Wave, next.WaveSettled, next.Failed = int32(min(len(keys), admitted+waveSize(st))), p.GetWave()+1, nil, failed
	return next
}

// stager advances the waves of the progressive rollouts whose owner's
// shard this replica holds.
type stager struct {
	*board
	api      *api
	replicas *replicas
	shards   *shards
	every    time.Duration
}

// run advances the waves every sg.every until ctx ends.
func (sg *stager) run(ctx context.Context) {
	tick := time.NewTicker(sg.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sg.mu.Lock()
		var ids []string
		for id, o := range sg.owners {
			p := o.rec.GetProgress()
			if p == nil || p.GetPaused() || p.GetAdmitted() >= p.GetTotal() || o.rec.GetStopped() || o.rec.GetDeleting() {
				continue
			}
			if sg.shards.active(shardOf(id, sg.shards.n)) == nil {
				continue // another replica advances it
			}
			ids = append(ids, id)
		}
		sg.mu.Unlock()
		for _, id := range ids {
			if err := sg.advance(ctx, id); err != nil && ctx.Err() == nil {
				sg.log.Debug("advance a staged rollout; will retry", zap.String("owner", id), zap.Error(err))
			}
		}
	}
}

// advance stores ownerID's next progress, if its clusters made one.
func (sg *stager) advance(ctx context.Context, ownerID string) error {
	if err := sg.replicas.refreshForeign(ctx, ownerID, false); err != nil {
		return err
	}
	sg.mu.Lock()
	o := sg.owners[ownerID]
	if o == nil || o.rec.GetProgress() == nil {
		sg.mu.Unlock()
		return nil
	}
	gen, was := o.rec.GetGeneration(), o.rec.GetProgress()
	next := nextProgress(o, time.Now())
	sg.mu.Unlock()
	if next == nil {
		return nil
	}
	_, err := sg.api.changeAs(ctx, ownerID, changeKeep, func(cur *owner) (*rsyncv1.StoredRollout, []*object, error) {
		if cur == nil || cur.rec.GetGeneration() != gen || !proto.Equal(cur.rec.GetProgress(), was) || cur.rec.GetStopped() {
			return nil, nil, nil // changed meanwhile: decided again at the next tick
		}
		rec := proto.CloneOf(cur.rec)
		rec.Progress = next
		return rec, cur.objs, nil
	})
	if err == nil && next.GetPaused() {
		sg.log.Info("staged rollout paused: too many clusters failed", zap.String("owner", ownerID),
			zap.Int64("generation", gen), zap.Int32("wave", next.GetWave()), zap.Strings("failed", next.GetFailed()))
	}
	return err
}

// progressOf is o's progress as Status shows it: the failed clusters as
// they are now. Called with mu held.
func progressOf(o *owner) *rsyncv1.RolloutProgress {
	p := o.rec.GetProgress()
	if p == nil {
		if o.rec.GetPrevious() == nil {
			return nil
		}
		return &rsyncv1.RolloutProgress{Strategy: o.rec.GetStrategy(), RollbackAvailable: true}
	}
	out := proto.CloneOf(p)
	out.Strategy, out.RollbackAvailable = o.rec.GetStrategy(), o.rec.GetPrevious() != nil
	if !out.GetPaused() {
		out.Failed = failedClusters(o)
	}
	return out
}

// stagedStatus adds o's progress to its status: a paused rollout is
// settled (nothing more happens without a resume, a rollback or an
// update); one with clusters still to admit is not. Called with mu held.
func stagedStatus(o *owner, out *rsyncv1.RolloutStatus) {
	out.Progress = progressOf(o)
	switch p := o.rec.GetProgress(); {
	case p == nil || o.rec.GetDeleting():
	case o.rec.GetStopped():
		if len(o.waiting) > 0 && !p.GetPaused() {
			out.State = rsyncv1.State_STATE_STOPPED // clusters are still to be reached
		}
	case p.GetPaused():
		out.Settled = true
	case len(o.waiting) > 0:
		out.Settled = false
		if out.GetState() == rsyncv1.State_STATE_APPLIED || out.GetState() == rsyncv1.State_STATE_FAILED {
			out.State = rsyncv1.State_STATE_PENDING
		}
	}
}
