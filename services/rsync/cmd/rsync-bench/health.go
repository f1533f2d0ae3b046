package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// benchHealth measures what the cluster health probes cost a rollout:
// probed simulated clusters are registered, the first n of them the
// rollout's targets, and the rollout is applied and deleted runs times
// with the probes off and on, alternately (after the probes' first
// round, whose record creations are reported apart, and once starting
// with the probes, first round included). It reports the median
// convergence times and their ratio, the probes made and the store
// writes they cost.
func benchHealth(n, probed int, interval time.Duration, runs int, latency time.Duration, failures float64) error {
	if n > probed {
		return fmt.Errorf("-clusters %d: at most -probe-clusters (%d): the rollout's clusters are among the probed ones", n, probed)
	}
	st, _, closeStore, err := openStore()
	if err != nil {
		return err
	}
	defer closeStore()
	sims := engine.SimulatedClusters{}
	for i := range probed {
		sims[fmt.Sprintf("sim/c%05d", i)] = &engine.Simulated{Latency: latency, FailureRate: failures}
	}
	all := keys(sims)
	e := engine.New(st, sims, engine.Config{Replica: "bench-0"}, zap.NewNop())
	defer runEngine(e)()
	ctx := context.Background()
	for !e.Holds("sim", "c00000") { // the first lease tick
		time.Sleep(10 * time.Millisecond)
	}
	csr, err := csrManifest()
	if err != nil {
		return err
	}
	set := lcSet("bench", csr)
	var targets []*rsyncv1.ClusterResources
	for _, k := range all[:n] {
		provider, name, _ := strings.Cut(k, "/")
		cr := &rsyncv1.ClusterResources{Provider: provider, Cluster: name}
		for _, m := range set {
			cr.Resources = append(cr.Resources, &rsyncv1.Resource{Manifest: m})
		}
		targets = append(targets, cr)
	}
	fmt.Printf("cluster health: %d simulated clusters probed every %s (concurrency %d), a rollout of %d objects to %d of them; %s latency per call, %.1f%% of calls fail\n",
		probed, interval, 32, len(set), n, latency, 100*failures)

	records := engine.HealthRecords(st)
	cfg := engine.HealthConfig{Interval: interval}
	rollout := func(owner string) (time.Duration, error) {
		start := time.Now()
		if _, err := e.Submit(ctx, owner, targets); err != nil {
			return 0, err
		}
		if err := waitSettled(ctx, e, owner, rsyncv1.State_STATE_APPLIED); err != nil {
			return 0, err
		}
		took := time.Since(start)
		if _, err := e.Delete(ctx, owner); err != nil {
			return 0, err
		}
		return took, waitSettled(ctx, e, owner, rsyncv1.State_STATE_DELETED)
	}
	// probing starts a prober; stop stops it and returns its counts.
	probing := func() (h *engine.Health, stop func()) {
		h = engine.NewHealth(records, e, sims, func(context.Context) ([]string, error) { return all, nil }, cfg, zap.NewNop())
		pctx, pcancel := context.WithCancel(ctx)
		pdone := make(chan struct{})
		go func() {
			_ = h.Run(pctx)
			close(pdone)
		}()
		return h, func() {
			pcancel()
			<-pdone
		}
	}

	// Cold: the rollout starts with the probes' first round (every
	// cluster's first record is created meanwhile).
	h, stop := probing()
	cold, err := rollout("bench/cold")
	if err != nil {
		return err
	}
	for h.Writes.Load() < int64(probed) { // each cluster's first result is stored (an interval)
		time.Sleep(10 * time.Millisecond)
	}
	firstRound := h.Writes.Load()
	stop()
	fmt.Printf("  first round: %d probes, %d records written (one per cluster)\n", h.Probes.Load(), firstRound)
	// A fleet probed for a while: each record last written at a random
	// point of its refresh period, so that they come due for their
	// refresh at the steady rate while the rollouts run (the first round
	// wrote them all at once).
	now := time.Now()
	for _, k := range all {
		provider, name, _ := strings.Cut(k, "/")
		at := timestamppb.New(now.Add(-rand.N(cfg.RefreshAfter(k))))
		rec := &rsyncv1.StoredClusterHealth{Provider: provider, Cluster: name, State: engine.HealthReady,
			Since: at, LastSeen: at, Checked: at, ServerVersion: "v0.0.0-simulated"}
		if err := records.Put(ctx, k, provider, rec); err != nil {
			return err
		}
	}
	fmt.Printf("  records aged: each last written at a random point of its refresh period, as in a steady fleet (%s)\n", time.Since(now).Round(time.Second))

	var without, with []time.Duration
	var probes, writes int64
	var probedFor time.Duration
	for run := range runs {
		took, err := rollout("bench/off-" + strconv.Itoa(run))
		if err != nil {
			return err
		}
		without = append(without, took)
		h, stop := probing()
		// The records are read at once, then each cluster's first probe
		// comes within an interval: the steady rate from the start.
		for h.Probes.Load() == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		p0, w0, t0 := h.Probes.Load(), h.Writes.Load(), time.Now()
		took, err = rollout("bench/on-" + strconv.Itoa(run))
		if err != nil {
			return err
		}
		with = append(with, took)
		probes, writes, probedFor = probes+h.Probes.Load()-p0, writes+h.Writes.Load()-w0, probedFor+time.Since(t0)
		stop()
	}
	off, on := median(without), median(with)
	fmt.Printf("  runs: %d; without probes %v\n  with probes %v\n", runs, without, with)
	fmt.Printf("  converged without probes: %s (median)\n", off.Round(time.Millisecond))
	fmt.Printf("  converged with probes:    %s (median), %+.1f %%\n", on.Round(time.Millisecond), 100*(on.Seconds()/off.Seconds()-1))
	fmt.Printf("  converged while the first round ran: %s\n", cold.Round(time.Millisecond))
	fmt.Printf("  during the probed rollouts: %.0f probes/s, %d health records written (%.1f per %s interval over %d clusters)\n",
		float64(probes)/probedFor.Seconds(), writes, float64(writes)/(probedFor.Seconds()/interval.Seconds()), interval, probed)
	fmt.Printf("  peak RSS of this process: %s\n", peakRSS())
	return nil
}
