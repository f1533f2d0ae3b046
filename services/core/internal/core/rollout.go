package core

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// Staged rollouts (docs/fleet.md, "Staged rollouts"): a logical cloud's
// spec.rollout says how an apply or update reaches its clusters. Core
// checks it, orders the clusters and turns a percent into a count; the
// resource synchronizer runs the waves (its engine's stages.go) and
// reports them, and core shows a paused rollout as Paused.

const (
	strategyAll         = "all"
	strategyProgressive = "progressive"
	// maxSoak bounds spec.rollout.soak.
	maxSoak = 24 * time.Hour
	// maxWave bounds a count in spec.rollout (the resource synchronizer
	// takes at most 10,000 clusters per rollout).
	maxWave = 10000
)

// The states resume and rollback start from.
var (
	resumeFrom   = []string{StatePaused}
	rollbackFrom = []string{StatePaused, StateInstantiating, StateInstantiated, StateInstantiateFailed}
)

// checkRollout refuses a rollout strategy naming the field at fault
// (field is "spec.rollout").
func checkRollout(field string, r *corev1.RolloutStrategy) error {
	if r == nil {
		return nil
	}
	switch r.GetStrategy() {
	case "", strategyAll, strategyProgressive:
	default:
		return errs.Invalid(field+".strategy", "is %q: must be %q or %q", r.GetStrategy(), strategyAll, strategyProgressive)
	}
	if mc := r.GetMaxConcurrency(); mc != "" {
		if _, _, err := parseConcurrency(field+".max-concurrency", mc); err != nil {
			return err
		}
	}
	if n := r.GetMaxFailures(); n < 0 || n > maxWave {
		return errs.Invalid(field+".max-failures", "is %d: must be between 0 and %d", n, maxWave)
	}
	if s := r.GetSoak(); s != "" {
		if _, err := parseSoak(field+".soak", s); err != nil {
			return err
		}
	}
	if l := r.GetOrderByLabel(); l != "" && strings.ContainsAny(l, " \t\n,") {
		return errs.Invalid(field+".order-by-label", "is %q: must be one cluster label", l)
	}
	return nil
}

// parseConcurrency reads max-concurrency: a count of at least 1, or a
// percent from 1% to 100% (percent true).
func parseConcurrency(field, s string) (n int, percent bool, err error) {
	num, percent := strings.CutSuffix(s, "%")
	n, err = strconv.Atoi(num)
	switch {
	case err != nil:
		return 0, false, errs.Invalid(field, "is %q: must be a count (\"2\") or a percent of the clusters (\"25%%\")", s)
	case percent && (n < 1 || n > 100):
		return 0, false, errs.Invalid(field, "is %q: a percent must be from 1%% to 100%%", s)
	case !percent && (n < 1 || n > maxWave):
		return 0, false, errs.Invalid(field, "is %q: a count must be from 1 to %d", s, maxWave)
	}
	return n, percent, nil
}

// parseSoak reads soak: a duration from 0 to maxSoak.
func parseSoak(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, errs.Invalid(field, "is %q: must be a duration (\"30s\", \"5m\")", s)
	case d < 0 || d > maxSoak:
		return 0, errs.Invalid(field, "is %q: must be from 0s to %s", s, maxSoak)
	}
	return d, nil
}

// staging is the resource synchronizer's strategy for a logical cloud's
// spec.rollout and its clusters in the order the waves take them: those
// carrying order-by-label first, each part in the references' order. nil
// (every cluster at once) unless the strategy is progressive.
func (s *rollouts) staging(ctx context.Context, r *corev1.RolloutStrategy, clusters []*rsyncv1.ClusterResources) (*rsyncv1.RolloutStrategy, []*rsyncv1.ClusterResources, error) {
	if r.GetStrategy() != strategyProgressive {
		return nil, clusters, nil
	}
	// Checked when stored; checked again, as a record stored by hand could
	// hold anything.
	if err := checkRollout("spec.rollout", r); err != nil {
		return nil, nil, err
	}
	wave := 1
	if mc := r.GetMaxConcurrency(); mc != "" {
		n, percent, _ := parseConcurrency("spec.rollout.max-concurrency", mc)
		wave = n
		if percent {
			wave = max(1, int(math.Ceil(float64(len(clusters))*float64(n)/100)))
		}
	}
	var soak time.Duration
	if r.GetSoak() != "" {
		soak, _ = parseSoak("spec.rollout.soak", r.GetSoak())
	}
	ordered := clusters
	if l := r.GetOrderByLabel(); l != "" {
		resp, err := s.rsync.SelectClusters(ctx, &rsyncv1.SelectClustersRequest{Labels: []string{l}})
		if err != nil {
			return nil, nil, err
		}
		first := map[string]bool{}
		for _, c := range resp.GetClusters() {
			first[clusterKey(c.GetProvider(), c.GetName())] = true
		}
		ordered = make([]*rsyncv1.ClusterResources, 0, len(clusters))
		for _, pass := range []bool{true, false} {
			for _, c := range clusters {
				if first[clusterKey(c.GetProvider(), c.GetCluster())] == pass {
					ordered = append(ordered, c)
				}
			}
		}
	}
	return &rsyncv1.RolloutStrategy{Progressive: true, MaxConcurrency: int32(wave), MaxFailures: r.GetMaxFailures(), Soak: durationpb.New(soak)}, ordered, nil
}

// waveView shows the resource synchronizer's progress of a rollout.
func waveView(p *rsyncv1.RolloutProgress) *corev1.RolloutWave {
	if p == nil {
		return nil
	}
	st := p.GetStrategy()
	out := &corev1.RolloutWave{
		Wave: p.GetWave(), Admitted: p.GetAdmitted(), Total: p.GetTotal(), Paused: p.GetPaused(),
		Failed: p.GetFailed(), Forgiven: p.GetForgiven(), RollbackAvailable: p.GetRollbackAvailable(),
		Strategy: &corev1.RolloutStrategy{Strategy: strategyAll},
	}
	if st.GetProgressive() {
		out.Strategy = &corev1.RolloutStrategy{Strategy: strategyProgressive, MaxConcurrency: strconv.Itoa(int(st.GetMaxConcurrency())),
			MaxFailures: st.GetMaxFailures(), Soak: st.GetSoak().AsDuration().String()}
	}
	if ws := p.GetWaveSettled(); ws != nil && p.GetAdmitted() < p.GetTotal() && !p.GetPaused() {
		out.SoakUntil = timestamppb.New(ws.AsTime().Add(st.GetSoak().AsDuration()))
	}
	return out
}

// ResumeLogicalCloud implements corev1.LogicalCloudServiceServer.
func (s *Lifecycle) ResumeLogicalCloud(ctx context.Context, req *corev1.ResumeLogicalCloudRequest) (*corev1.ResumeLogicalCloudResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	st, err := s.transition(ctx, "resume", project, lc, resumeFrom, "",
		func(ctx context.Context, _ *corev1.LogicalCloud, _ *corev1.LogicalCloudStatus) (int64, error) {
			_, err := s.rsync.ResumeRollout(ctx, &rsyncv1.ResumeRolloutRequest{Owner: rolloutOwner(project, lc)})
			return 0, err
		})
	if err != nil {
		return nil, err
	}
	return &corev1.ResumeLogicalCloudResponse{Status: st}, nil
}

// RollbackLogicalCloud implements corev1.LogicalCloudServiceServer.
func (s *Lifecycle) RollbackLogicalCloud(ctx context.Context, req *corev1.RollbackLogicalCloudRequest) (*corev1.RollbackLogicalCloudResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	st, err := s.transition(ctx, "rollback", project, lc, rollbackFrom, phaseApplying,
		func(ctx context.Context, _ *corev1.LogicalCloud, st *corev1.LogicalCloudStatus) (int64, error) {
			resp, err := s.rsync.RollbackRollout(ctx, &rsyncv1.RollbackRolloutRequest{Owner: rolloutOwner(project, lc)})
			if errs.ReasonOf(errs.ToStatus(err)) == errs.ReasonWrongState {
				return 0, errs.Because(errs.ReasonWrongState, "logical cloud %q is %s and keeps no previous generation to roll back to: "+
					"only an apply or update with spec.rollout.strategy progressive keeps one, until it is rolled back", lc, st.GetState())
			}
			return resp.GetGeneration(), err
		})
	if err != nil {
		return nil, err
	}
	return &corev1.RollbackLogicalCloudResponse{Status: st}, nil
}
