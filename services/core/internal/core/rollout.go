package core

import (
	"context"
	"strconv"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/rollout"
)

// Staged rollouts (docs/fleet.md, "Staged rollouts"): a logical cloud's
// spec.rollout says how an apply or update reaches its clusters. Core
// checks it, orders the clusters and turns a percent into a count; the
// resource synchronizer runs the waves (its engine's stages.go) and
// reports them, and core shows a paused rollout as Paused.

// The states resume and rollback start from, of a logical cloud and of a
// traffic intent group.
var (
	resumeFrom          = []string{StatePaused}
	rollbackFrom        = []string{StatePaused, StateInstantiating, StateInstantiated, StateInstantiateFailed}
	trafficResumeFrom   = []string{TrafficPaused}
	trafficRollbackFrom = []string{TrafficPaused, TrafficApplying, TrafficApplied, TrafficApplyFailed}
)

// checkRollout refuses a rollout strategy naming the field at fault
// (field is "spec.rollout").
func checkRollout(field string, r *typesv1.RolloutStrategy) error { return rollout.Check(field, r) }

// staging is the resource synchronizer's strategy for a logical cloud's
// spec.rollout and its clusters in the order the waves take them: those
// carrying order-by-label first, each part in the references' order. nil
// (every cluster at once) unless the strategy is progressive.
func (s *rollouts) staging(ctx context.Context, r *typesv1.RolloutStrategy, clusters []*rsyncv1.ClusterResources) (*rsyncv1.RolloutStrategy, []*rsyncv1.ClusterResources, error) {
	if r.GetStrategy() != rollout.Progressive {
		return nil, clusters, nil
	}
	// Checked when stored; checked again, as a record stored by hand could
	// hold anything.
	if err := checkRollout("spec.rollout", r); err != nil {
		return nil, nil, err
	}
	wave, soak := rollout.WaveSize(r, len(clusters)), rollout.Soak(r)
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
		Strategy: &typesv1.RolloutStrategy{Strategy: rollout.All},
	}
	if st.GetProgressive() {
		out.Strategy = &typesv1.RolloutStrategy{Strategy: rollout.Progressive, MaxConcurrency: strconv.Itoa(int(st.GetMaxConcurrency())),
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

// ResumeTrafficIntentGroup implements corev1.TrafficLifecycleServiceServer.
func (t *TrafficRollouts) ResumeTrafficIntentGroup(ctx context.Context, req *corev1.ResumeTrafficIntentGroupRequest) (*corev1.ResumeTrafficIntentGroupResponse, error) {
	g := groupRef{req.GetProject(), req.GetCompositeApp(), req.GetVersion(), req.GetGroup()}
	st, err := t.transition(ctx, "resume", g, trafficResumeFrom, phaseApplying, func(ctx context.Context, _, _ string) (int64, error) {
		if _, err := t.rollouts.rsync.ResumeRollout(ctx, &rsyncv1.ResumeRolloutRequest{Owner: g.owner()}); err != nil {
			return 0, err
		}
		return t.generation(ctx, g)
	})
	if err != nil {
		return nil, err
	}
	return &corev1.ResumeTrafficIntentGroupResponse{Status: st}, nil
}

// RollbackTrafficIntentGroup implements corev1.TrafficLifecycleServiceServer.
func (t *TrafficRollouts) RollbackTrafficIntentGroup(ctx context.Context, req *corev1.RollbackTrafficIntentGroupRequest) (*corev1.RollbackTrafficIntentGroupResponse, error) {
	g := groupRef{req.GetProject(), req.GetCompositeApp(), req.GetVersion(), req.GetGroup()}
	st, err := t.transition(ctx, "rollback", g, trafficRollbackFrom, phaseApplying, func(ctx context.Context, _, state string) (int64, error) {
		resp, err := t.rollouts.rsync.RollbackRollout(ctx, &rsyncv1.RollbackRolloutRequest{Owner: g.owner()})
		if errs.ReasonOf(errs.ToStatus(err)) == errs.ReasonWrongState {
			return 0, errs.Because(errs.ReasonWrongState, "traffic intent group %q is %s and keeps no previous generation to roll back to: "+
				"only an apply or update with rollout.strategy progressive keeps one, until it is rolled back", g.group, state)
		}
		return resp.GetGeneration(), err
	})
	if err != nil {
		return nil, err
	}
	return &corev1.RollbackTrafficIntentGroupResponse{Status: st}, nil
}

// generation is the resource synchronizer's generation of g's rollout (a
// resume keeps it; the group's transition stores it again).
func (t *TrafficRollouts) generation(ctx context.Context, g groupRef) (int64, error) {
	resp, err := t.rollouts.rsync.GetRolloutStatus(ctx, &rsyncv1.GetRolloutStatusRequest{Owner: g.owner()})
	return resp.GetStatus().GetGeneration(), err
}
