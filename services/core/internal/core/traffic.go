package core

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Traffic intent groups in core (docs/traffic.md "Who does what"): the
// traffic service stores the intents and renders them; core, which holds
// the logical cloud, decides when: at apply and update it tells the traffic
// service what it holds of the group's logical cloud and submits the
// objects under the group's own rollout owner. Its record of an applied
// group (collection traffic_rollouts, parent the logical cloud) keeps the
// group's phase and stops the logical cloud from being terminated under
// it.

// The states a traffic intent group is shown in.
const (
	TrafficCreated         = "Created"
	TrafficApplying        = "Applying"
	TrafficApplied         = "Applied"
	TrafficApplyFailed     = "ApplyFailed"
	TrafficTerminating     = "Terminating"
	TrafficTerminated      = "Terminated"
	TrafficTerminateFailed = "TerminateFailed"
	TrafficPaused          = "Paused" // a progressive rollout paused (rollout.go)
)

var (
	trafficApplyFrom     = []string{TrafficCreated, TrafficTerminated}
	trafficUpdateFrom    = []string{TrafficApplying, TrafficApplied, TrafficApplyFailed, TrafficPaused}
	trafficTerminateFrom = []string{TrafficApplying, TrafficApplied, TrafficApplyFailed, TrafficPaused, TrafficTerminating, TrafficTerminateFailed}
	// trafficOnCloud are the logical cloud states a group applies to: its
	// mesh's objects may still be on their way (the resource synchronizer
	// retries a kind whose CRD is not there yet).
	trafficOnCloud = []string{StateInstantiating, StateInstantiated}
)

// trafficStates names the lifecycle's states for a traffic group.
var trafficStates = map[string]string{
	StateCreated: TrafficCreated, StateInstantiating: TrafficApplying, StateInstantiated: TrafficApplied,
	StateInstantiateFailed: TrafficApplyFailed, StateTerminating: TrafficTerminating,
	StateTerminated: TrafficTerminated, StateTerminateFailed: TrafficTerminateFailed, StatePaused: TrafficPaused,
}

// trafficOwner is the resource synchronizer's owner id of a group.
func trafficOwner(project, rb, version, group string) string {
	return "traffic/" + project + "/" + rb + "/" + version + "/" + group
}

// groupRef names a traffic intent group.
type groupRef struct{ project, rb, version, group string }

func (g groupRef) key() string   { return store.Key(g.project, g.rb, g.version, g.group) }
func (g groupRef) owner() string { return trafficOwner(g.project, g.rb, g.version, g.group) }

// TrafficRollouts is the TrafficLifecycleService.
type TrafficRollouts struct {
	corev1.UnimplementedTrafficLifecycleServiceServer
	reader     *cloudReader
	rollouts   *rollouts
	references *References
	// records are core's records of the applied groups, by logical cloud.
	records         *store.Records[*corev1.TrafficRollout]
	rsync           rsyncv1.RsyncServiceClient
	traffic         trafficv1.TrafficServiceClient
	trafficInternal trafficv1.TrafficInternalServiceClient
	mesh            servicemeshv1.ServiceMeshServiceClient
	locks           *keyLocks
}

// NewTrafficRollouts serves traffic groups' lifecycle over the logical
// clouds' collections and peers (NewLogicalClouds made it).
func NewTrafficRollouts(clouds *LogicalClouds) *TrafficRollouts {
	return clouds.traffic
}

func trafficRecords(st *store.Store) *store.Records[*corev1.TrafficRollout] {
	return store.NewRecords(st, TrafficRolloutsCollection, "traffic rollout", func() *corev1.TrafficRollout { return &corev1.TrafficRollout{} })
}

// Register serves the API on r.
func (t *TrafficRollouts) Register(r grpc.ServiceRegistrar) {
	corev1.RegisterTrafficLifecycleServiceServer(r, t)
}

// record reads core's record of a group (ok false: never applied).
func (t *TrafficRollouts) record(ctx context.Context, g groupRef) (store.Versioned[*corev1.TrafficRollout], bool, error) {
	rec, err := t.records.Get(ctx, g.key())
	if errs.Code(err) == codes.NotFound {
		return rec, false, nil
	}
	return rec, err == nil, err
}

// status is the group's state from core's record and the resource
// synchronizer, with its DNS runs.
func (t *TrafficRollouts) status(ctx context.Context, g groupRef, lc string, rec *corev1.TrafficRollout) (*corev1.TrafficIntentGroupStatus, error) {
	phase := phaseCreated
	if rec != nil {
		phase, lc = phaseWord(rec.GetLifecycle().GetPhase()), rec.GetLogicalCloud()
	}
	var rs *rsyncv1.RolloutStatus
	if phase != phaseCreated {
		resp, err := t.rollouts.rsync.GetRolloutStatus(ctx, &rsyncv1.GetRolloutStatusRequest{Owner: g.owner()})
		if err != nil && errs.Code(err) != codes.NotFound {
			return nil, err
		}
		rs = resp.GetStatus()
	}
	v := statusView(g.project, lc, phase, rs)
	out := &corev1.TrafficIntentGroupStatus{
		Project: g.project, CompositeApp: g.rb, Version: g.version, Group: g.group, LogicalCloud: lc,
		State: trafficStates[v.GetState()], Ready: v.GetReady(), Total: v.GetTotal(), Generation: v.GetGeneration(),
		LastErrors: v.GetLastErrors(), Clusters: v.GetClusters(), Rollout: v.GetRollout(),
	}
	if rs == nil && phase == phaseApplying {
		out.LastErrors = []string{"the resource synchronizer has no rollout for this group: POST .../update submits it again"}
	}
	if phase != phaseCreated {
		dns, err := t.trafficInternal.GetTrafficDnsStatus(ctx, &trafficv1.GetTrafficDnsStatusRequest{
			Project: g.project, CompositeApp: g.rb, Version: g.version, Group: g.group})
		if err != nil {
			return nil, err
		}
		out.Dns = dns.GetRuns()
	}
	return out, nil
}

// transition moves a group along its lifecycle, as LogicalClouds.transition
// does for a logical cloud: act runs when the group's state is one of
// from, and phase is stored with the generation act returns.
func (t *TrafficRollouts) transition(ctx context.Context, verb string, g groupRef, from []string, phase string,
	act func(ctx context.Context, lc string, state string) (int64, error)) (*corev1.TrafficIntentGroupStatus, error) {
	ctx, unlock, err := t.locks.lock(ctx, g.key(), fmt.Sprintf("traffic intent group %q", g.group))
	if err != nil {
		return nil, err
	}
	defer unlock()
	grp, err := t.traffic.GetTrafficIntentGroup(ctx, &trafficv1.GetTrafficIntentGroupRequest{
		Project: g.project, CompositeApp: g.rb, Version: g.version, Name: g.group})
	if err != nil {
		return nil, err
	}
	lc := grp.GetTrafficIntentGroup().GetLogicalCloud()
	cur, found, err := t.record(ctx, g)
	if err != nil {
		return nil, err
	}
	var rec *corev1.TrafficRollout
	if found {
		rec = cur.Msg
	}
	st, err := t.status(ctx, g, lc, rec)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(from, st.GetState()) {
		return nil, errs.Because(errs.ReasonWrongState, "traffic intent group %q is %s: %s needs it to be %s", g.group, st.GetState(), verb, strings.Join(from, " or "))
	}
	if lc == "" {
		// Created without one (seed 004's body {name, description}):
		// never applied, so only apply gets here.
		return nil, errs.Because(errs.ReasonWrongState, "traffic intent group %q names no logical cloud: set its logical-cloud first "+
			"(PUT .../traffic-intent-groups/%s with {\"logical-cloud\": \"<logical cloud of project %s>\"}), then %s it", g.group, g.group, g.project, verb)
	}
	if found && rec.GetLogicalCloud() != lc && st.GetState() != TrafficTerminated {
		return nil, errs.FailedPrecondition("traffic intent group %q is applied to logical cloud %q, not %q", g.group, rec.GetLogicalCloud(), lc)
	}
	gen, err := act(ctx, lc, st.GetState())
	if err != nil {
		return nil, err
	}
	next := &corev1.TrafficRollout{Project: g.project, CompositeApp: g.rb, Version: g.version, Group: g.group, LogicalCloud: lc,
		Lifecycle: &corev1.Lifecycle{Phase: phase, Generation: gen, Changed: timestamppb.Now()}}
	wctx := context.WithoutCancel(ctx)
	switch {
	case !found:
		err = t.records.Create(wctx, g.key(), store.Key(g.project, lc), next)
	case rec.GetLogicalCloud() != lc:
		// A terminated group now names another logical cloud: the record
		// moves (its parent is the logical cloud).
		if err = t.records.Delete(wctx, g.key()); err == nil {
			err = t.records.Create(wctx, g.key(), store.Key(g.project, lc), next)
		}
	default:
		err = t.records.Update(wctx, g.key(), cur.Version, next)
	}
	if err != nil {
		return nil, err
	}
	return t.status(ctx, g, lc, next)
}

// ApplyTrafficIntentGroup implements corev1.TrafficLifecycleServiceServer.
func (t *TrafficRollouts) ApplyTrafficIntentGroup(ctx context.Context, req *corev1.ApplyTrafficIntentGroupRequest) (*corev1.ApplyTrafficIntentGroupResponse, error) {
	g := groupRef{req.GetProject(), req.GetCompositeApp(), req.GetVersion(), req.GetGroup()}
	st, err := t.transition(ctx, "apply", g, trafficApplyFrom, phaseApplying, func(ctx context.Context, lc, _ string) (int64, error) {
		return t.renderAndSubmit(ctx, g, lc, false)
	})
	if err != nil {
		return nil, err
	}
	return &corev1.ApplyTrafficIntentGroupResponse{Status: st}, nil
}

// UpdateTrafficIntentGroupResources implements corev1.TrafficLifecycleServiceServer.
func (t *TrafficRollouts) UpdateTrafficIntentGroupResources(ctx context.Context, req *corev1.UpdateTrafficIntentGroupResourcesRequest) (*corev1.UpdateTrafficIntentGroupResourcesResponse, error) {
	g := groupRef{req.GetProject(), req.GetCompositeApp(), req.GetVersion(), req.GetGroup()}
	st, err := t.transition(ctx, "update", g, trafficUpdateFrom, phaseApplying, func(ctx context.Context, lc, _ string) (int64, error) {
		return t.renderAndSubmit(ctx, g, lc, true)
	})
	if err != nil {
		return nil, err
	}
	return &corev1.UpdateTrafficIntentGroupResourcesResponse{Status: st}, nil
}

// TerminateTrafficIntentGroup implements corev1.TrafficLifecycleServiceServer.
func (t *TrafficRollouts) TerminateTrafficIntentGroup(ctx context.Context, req *corev1.TerminateTrafficIntentGroupRequest) (*corev1.TerminateTrafficIntentGroupResponse, error) {
	g := groupRef{req.GetProject(), req.GetCompositeApp(), req.GetVersion(), req.GetGroup()}
	if err := mayForce(ctx, req.GetForce()); err != nil {
		return nil, err
	}
	st, err := t.transition(ctx, "terminate", g, trafficTerminateFrom, phaseTerminating, func(ctx context.Context, _, state string) (int64, error) {
		// The DNS runs are released first: they delete their records
		// whatever the clusters still hold.
		if _, err := t.trafficInternal.ReleaseTrafficIntentGroup(ctx, &trafficv1.ReleaseTrafficIntentGroupRequest{
			Project: g.project, CompositeApp: g.rb, Version: g.version, Group: g.group}); err != nil {
			return 0, err
		}
		return t.rollouts.deleteRollout(ctx, g.owner(), trafficToCloudState(state), req.GetForce())
	})
	if err != nil {
		return nil, err
	}
	return &corev1.TerminateTrafficIntentGroupResponse{Status: st}, nil
}

// trafficToCloudState is the logical cloud state a group state mirrors.
func trafficToCloudState(state string) string {
	for k, v := range trafficStates {
		if v == state {
			return k
		}
	}
	return state
}

// GetTrafficIntentGroupStatus implements corev1.TrafficLifecycleServiceServer.
func (t *TrafficRollouts) GetTrafficIntentGroupStatus(ctx context.Context, req *corev1.GetTrafficIntentGroupStatusRequest) (*corev1.GetTrafficIntentGroupStatusResponse, error) {
	g := groupRef{req.GetProject(), req.GetCompositeApp(), req.GetVersion(), req.GetGroup()}
	grp, err := t.traffic.GetTrafficIntentGroup(ctx, &trafficv1.GetTrafficIntentGroupRequest{
		Project: g.project, CompositeApp: g.rb, Version: g.version, Name: g.group})
	if err != nil {
		return nil, err
	}
	cur, found, err := t.record(ctx, g)
	if err != nil {
		return nil, err
	}
	var rec *corev1.TrafficRollout
	if found {
		rec = cur.Msg
	}
	st, err := t.status(ctx, g, grp.GetTrafficIntentGroup().GetLogicalCloud(), rec)
	if err != nil {
		return nil, err
	}
	return &corev1.GetTrafficIntentGroupStatusResponse{Status: st}, nil
}

// renderAndSubmit tells the traffic service what core holds of the
// group's logical cloud and submits what it renders.
func (t *TrafficRollouts) renderAndSubmit(ctx context.Context, g groupRef, lc string, update bool) (int64, error) {
	if err := checkIntentClusters(ctx, t.traffic, t.references.sets, g); err != nil {
		return 0, err
	}
	c, err := t.reader.versioned(ctx, g.project, lc)
	if errs.Code(err) == codes.NotFound {
		return 0, errs.Because(errs.ReasonWrongState, "logical cloud %q of traffic intent group %q does not exist (any more)", lc, g.group)
	}
	if err != nil {
		return 0, err
	}
	cst, err := t.rollouts.status(ctx, g.project, lc, c.Msg)
	if err != nil {
		return 0, err
	}
	if !slices.Contains(trafficOnCloud, cst.GetState()) {
		return 0, errs.Because(errs.ReasonWrongState, "logical cloud %q is %s: traffic intents apply to an instantiated logical cloud", lc, cst.GetState())
	}
	mesh, err := t.mesh.GetServiceMesh(ctx, &servicemeshv1.GetServiceMeshRequest{Project: g.project, LogicalCloud: lc})
	if errs.Code(err) == codes.NotFound || (err == nil && mesh.GetServiceMesh().GetReleased()) {
		return 0, errs.Because(errs.ReasonWrongState, "logical cloud %q has no service mesh: traffic intents need one (spec.service-mesh.enabled, then POST .../update)", lc)
	}
	if err != nil {
		return 0, err
	}
	targets, err := t.references.targets(ctx, g.project, lc, c.Msg)
	if err != nil {
		return 0, err
	}
	req := &trafficv1.RenderTrafficIntentGroupRequest{
		Project: g.project, CompositeApp: g.rb, Version: g.version, Group: g.group, LogicalCloud: lc,
		Namespace: c.Msg.GetSpec().GetNamespace(), IstioNamespace: mesh.GetServiceMesh().GetIstioNamespace(),
		Revision: mesh.GetServiceMesh().GetRevision(),
	}
	for _, tg := range targets {
		cl, err := t.rsync.GetCluster(ctx, &rsyncv1.GetClusterRequest{Provider: tg.provider, Name: tg.cluster})
		if err != nil {
			return 0, err
		}
		req.Clusters = append(req.Clusters, &trafficv1.TrafficTarget{Provider: tg.provider, Cluster: tg.cluster,
			Labels: cl.GetCluster().GetSpec().GetLabels(), LoadbalancerIp: tg.loadbalancerIP})
	}
	resp, err := t.trafficInternal.RenderTrafficIntentGroup(ctx, req)
	if err != nil {
		return 0, err
	}
	var clusters []*rsyncv1.ClusterResources
	for _, cm := range resp.GetClusters() {
		cr := &rsyncv1.ClusterResources{Provider: cm.GetProvider(), Cluster: cm.GetCluster()}
		for _, m := range cm.GetManifests() {
			cr.Resources = append(cr.Resources, &rsyncv1.Resource{Manifest: m})
		}
		clusters = append(clusters, cr)
	}
	grp, err := t.traffic.GetTrafficIntentGroup(ctx, &trafficv1.GetTrafficIntentGroupRequest{
		Project: g.project, CompositeApp: g.rb, Version: g.version, Name: g.group})
	if err != nil {
		return 0, err
	}
	strategy, clusters, err := t.rollouts.staging(ctx, grp.GetTrafficIntentGroup().GetRollout(), clusters) // rollout.go
	if err != nil {
		return 0, err
	}
	// The objects go in the logical cloud's namespace, which its own
	// rollout holds: the group's rollout is its guest there.
	return t.rollouts.submitStaged(ctx, g.owner(), rolloutOwner(g.project, lc), strategy, clusters, update)
}

// holds refuses (409 REFERENCED) to terminate a logical cloud that an
// applied traffic intent group still configures.
func (t *TrafficRollouts) holds(ctx context.Context, project, lc string) error {
	recs, err := t.records.List(ctx, store.Key(project, lc))
	if err != nil {
		return err
	}
	for _, r := range recs {
		if phaseWord(r.GetLifecycle().GetPhase()) == phaseApplying {
			return errs.Because(errs.ReasonReferenced, "traffic intent group %q (rb %q, version %q) is applied to logical cloud %q: terminate it first",
				r.GetGroup(), r.GetCompositeApp(), r.GetVersion(), lc)
		}
	}
	return nil
}

// purge removes core's records of the traffic groups of logical cloud
// parent (the delete cascade: an applied group keeps the logical cloud
// from being terminated, so from being deleted).
func (t *TrafficRollouts) purge(ctx context.Context, parent string) error {
	_, err := t.records.DeleteUnder(ctx, parent)
	return err
}
