package core

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/logging"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// Lifecycle phases, as stored: the last transition asked for, named by the
// state it asks for (the words of the states shown). What the clusters hold
// is the resource synchronizer's to say; the state shown is derived from
// both (see derive).
const (
	phaseCreated     = StateCreated
	phaseApplying    = StateInstantiated
	phaseTerminating = StateTerminated
)

// legacyPhases are the phases of records stored before the phase spoke the
// states' words, and the empty phase of records older than the lifecycle
// (never applied).
var legacyPhases = map[string]string{"": phaseCreated, "created": phaseCreated, "applying": phaseApplying, "terminating": phaseTerminating}

// phaseWord is a stored phase in the states' words.
func phaseWord(p string) string {
	if w, ok := legacyPhases[p]; ok {
		return w
	}
	return p
}

// The states a logical cloud is shown in.
const (
	StateCreated           = "Created"
	StateInstantiating     = "Instantiating"
	StateInstantiated      = "Instantiated"
	StateInstantiateFailed = "InstantiateFailed"
	StateTerminating       = "Terminating"
	StateTerminated        = "Terminated"
	StateTerminateFailed   = "TerminateFailed"
	// StatePaused: a progressive rollout stopped after more clusters
	// failed than its max-failures (rollout.go); resume or roll back.
	StatePaused = "Paused"
)

// The states each transition starts from.
var (
	applyFrom  = []string{StateCreated, StateTerminated}
	updateFrom = []string{StateInstantiating, StateInstantiated, StateInstantiateFailed, StatePaused}
	stopFrom   = []string{StateInstantiating, StateInstantiated, StateInstantiateFailed, StatePaused, StateTerminating, StateTerminateFailed}
	// terminateFrom includes Terminating: a terminate stopped half way is
	// resumed by terminating again, and one waiting on a cluster that is
	// down is forced (?force=true): the documented exits from that state.
	// A terminate under way is not asked for twice (409).
	terminateFrom = []string{StateInstantiating, StateInstantiated, StateInstantiateFailed, StatePaused, StateTerminating, StateTerminateFailed}
	deleteFrom    = []string{StateCreated, StateTerminated}
)

// phaseOf is a logical cloud's stored phase, in the states' words.
func phaseOf(c *corev1.LogicalCloud) string {
	return phaseWord(c.GetLifecycle().GetPhase())
}

// rolloutOwner is the resource synchronizer's owner id of a logical cloud.
func rolloutOwner(project, lc string) string { return "lc/" + project + "/" + lc }

// derive is the state shown for a stored phase and the resource
// synchronizer's status (nil when it has no rollout for the logical cloud).
// The rollout's own deleting flag says which way it is going.
func derive(phase string, rs *rsyncv1.RolloutStatus) string {
	switch {
	case phase == phaseCreated:
		return StateCreated
	case rs == nil && phase == phaseTerminating:
		return StateTerminated
	case rs == nil:
		return StateInstantiateFailed
	case rs.GetDeleting():
		switch {
		case !rs.GetSettled() || rs.GetState() == rsyncv1.State_STATE_STOPPED:
			return StateTerminating
		case rs.GetState() == rsyncv1.State_STATE_DELETED, rs.GetState() == rsyncv1.State_STATE_ORPHANED:
			// Orphaned: a forced terminate, or a cluster deleted from the
			// registry; the status lists what may remain.
			return StateTerminated
		}
		return StateTerminateFailed
	case phase == phaseTerminating:
		return StateTerminating // the deletion was asked for; this status predates it
	case rs.GetProgress().GetPaused() && !rs.GetStopped():
		return StatePaused
	case !rs.GetSettled() || rs.GetState() == rsyncv1.State_STATE_STOPPED:
		return StateInstantiating
	case rs.GetState() == rsyncv1.State_STATE_APPLIED:
		return StateInstantiated
	}
	return StateInstantiateFailed
}

// Lifecycle is a logical cloud's lifecycle: apply, update, stop and
// terminate (the transitions, under the logical cloud's lock), its
// status, and the render that hands it to the resource synchronizer.
type Lifecycle struct {
	*cloudReader
	*rollouts
	locks        *keyLocks
	namespaces   namespacev1.NamespaceInternalServiceClient
	quotas       quotav1.QuotaInternalServiceClient
	users        userv1.UserInternalServiceClient
	meshInternal servicemeshv1.ServiceMeshInternalServiceClient
	references   *References
	meshes       *Meshes
	traffic      *TrafficRollouts
	log          *zap.Logger
	// WatchMax is the longest a status watch runs (DCM_WATCH_MAX); 0 is
	// no maximum.
	watchMax time.Duration
}

// rollouts is a logical cloud's rollout in the resource synchronizer: its
// state, and the submits and deletes of it (and of a traffic group's).
type rollouts struct {
	rsync rsyncv1.RsyncInternalServiceClient
	log   *zap.Logger
}

// status reads the logical cloud's state from its stored phase and the
// resource synchronizer.
func (s *rollouts) status(ctx context.Context, project, lc string, c *corev1.LogicalCloud) (*corev1.LogicalCloudStatus, error) {
	phase := phaseOf(c)
	var rs *rsyncv1.RolloutStatus
	if phase != phaseCreated {
		resp, err := s.rsync.GetRolloutStatus(ctx, &rsyncv1.GetRolloutStatusRequest{Owner: rolloutOwner(project, lc)})
		if err != nil && errs.Code(err) != codes.NotFound {
			return nil, err
		}
		rs = resp.GetStatus()
	}
	out := statusView(project, lc, phase, rs)
	out.LabelChanges = c.GetLifecycle().GetLabelChanges()
	return out, nil
}

// statusView shows the resource synchronizer's status with the state.
func statusView(project, lc, phase string, rs *rsyncv1.RolloutStatus) *corev1.LogicalCloudStatus {
	out := &corev1.LogicalCloudStatus{
		Project: project, LogicalCloud: lc, State: derive(phase, rs),
		Stopped: rs.GetStopped(), Ready: rs.GetReady(), Total: rs.GetTotal(), Generation: rs.GetGeneration(),
		Rollout: waveView(rs.GetProgress()), // rollout.go
	}
	if rs == nil && phase == phaseApplying {
		out.LastErrors = []string{"the resource synchronizer has no rollout for this logical cloud: POST .../update submits it again"}
	}
	for _, c := range rs.GetClusters() {
		cs := &corev1.ClusterStatus{
			ClusterProvider: c.GetProvider(), ClusterName: c.GetCluster(), State: stateName(c.GetState()),
			Ready: c.GetReady(), Total: c.GetTotal(), LastError: hidden(project, c.GetLastError()), Health: c.GetHealth(),
		}
		if cs.GetLastError() != "" {
			name := c.GetProvider() + "/" + c.GetCluster()
			if h := c.GetHealth(); h != "" {
				name += " (" + h + ")" // down: rsync's probes say so
			}
			out.LastErrors = append(out.LastErrors, name+": "+cs.GetLastError())
		}
		for _, r := range c.GetResources() {
			cs.Resources = append(cs.Resources, &corev1.ResourceStatus{
				ApiVersion: r.GetApiVersion(), Kind: r.GetKind(), Namespace: r.GetNamespace(), Name: r.GetName(),
				Operation: strings.ToLower(strings.TrimPrefix(r.GetOperation().String(), "OPERATION_")),
				State:     stateName(r.GetState()), Attempts: r.GetAttempts(), NextRetry: r.GetNextRetry(), LastError: hidden(project, r.GetLastError()),
			})
		}
		for _, d := range c.GetDrift() {
			cs.Drift = append(cs.Drift, &corev1.Drift{
				Time: d.GetTime(), ApiVersion: d.GetApiVersion(), Kind: d.GetKind(), Namespace: d.GetNamespace(), Name: d.GetName(),
				Deleted: d.GetDeleted(), Fields: d.GetFields(), Managers: hiddenManagers(project, d.GetManagers()), Repaired: d.GetRepaired(), Error: hidden(project, d.GetError()),
			})
		}
		out.Clusters = append(out.Clusters, cs)
	}
	return out
}

func stateName(st rsyncv1.State) string {
	return strings.ToLower(strings.TrimPrefix(st.String(), "STATE_"))
}

// versioned reads a live logical cloud with its version: NotFound if it, or
// its project, is missing or being deleted.
func (s *cloudReader) versioned(ctx context.Context, project, lc string) (store.Versioned[*corev1.LogicalCloud], error) {
	c, err := s.clouds.Get(ctx, store.Key(project, lc))
	if errs.Code(err) == codes.NotFound {
		if _, perr := s.projects.Get(ctx, project); perr != nil {
			return c, perr
		}
		return c, errs.NotFound("logical cloud %q not found in project %q", lc, project)
	}
	return c, err
}

// transition moves a logical cloud along its lifecycle: if its state is
// one of from, act runs against the resource synchronizer and, when it
// succeeds, phase is stored with the generation act returns ("" keeps
// both, for stop). A forbidden transition is FailedPrecondition (409) naming the
// current state.
func (s *Lifecycle) transition(ctx context.Context, verb, project, lc string, from []string, phase string,
	act func(ctx context.Context, c *corev1.LogicalCloud, st *corev1.LogicalCloudStatus) (int64, error)) (*corev1.LogicalCloudStatus, error) {
	ctx, unlock, err := s.locks.lock(ctx, store.Key(project, lc), fmt.Sprintf("logical cloud %q", lc))
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.transitionLocked(ctx, verb, project, lc, from, phase, act)
}

// transitionLocked is transition for a caller that holds the logical
// cloud's lock (a registry change followed, labels.go).
func (s *Lifecycle) transitionLocked(ctx context.Context, verb, project, lc string, from []string, phase string,
	act func(ctx context.Context, c *corev1.LogicalCloud, st *corev1.LogicalCloudStatus) (int64, error)) (*corev1.LogicalCloudStatus, error) {
	key := store.Key(project, lc)
	cur, err := s.versioned(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	st, err := s.status(ctx, project, lc, cur.Msg)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(from, st.GetState()) {
		return nil, errs.Because(errs.ReasonWrongState, "logical cloud %q is %s: %s needs it to be %s", lc, st.GetState(), verb, strings.Join(from, " or "))
	}
	gen, err := act(ctx, cur.Msg, st)
	if err != nil {
		return nil, err
	}
	c := cur.Msg
	if phase != "" {
		was := phaseOf(c)
		// Modify re-reads: a metadata PUT in between must not lose the phase.
		c, err = s.clouds.Modify(context.WithoutCancel(ctx), key, func(c *corev1.LogicalCloud) error {
			if phaseOf(c) != was {
				return errs.Aborted("logical cloud %q changed phase during %s; read its status", lc, verb)
			}
			c.Lifecycle = &corev1.Lifecycle{Phase: phase, Generation: gen, Changed: timestamppb.Now(),
				LabelledClusters: c.GetLifecycle().GetLabelledClusters(), LabelChanges: c.GetLifecycle().GetLabelChanges()}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return s.status(ctx, project, lc, c)
}

// ApplyLogicalCloud implements corev1.LogicalCloudServiceServer.
func (s *Lifecycle) ApplyLogicalCloud(ctx context.Context, req *corev1.ApplyLogicalCloudRequest) (*corev1.ApplyLogicalCloudResponse, error) {
	st, err := s.renderAndSubmit(ctx, "apply", req.GetProject(), req.GetLogicalCloud(), applyFrom, false)
	if err != nil {
		return nil, err
	}
	return &corev1.ApplyLogicalCloudResponse{Status: st}, nil
}

// UpdateLogicalCloudResources implements corev1.LogicalCloudServiceServer.
func (s *Lifecycle) UpdateLogicalCloudResources(ctx context.Context, req *corev1.UpdateLogicalCloudResourcesRequest) (*corev1.UpdateLogicalCloudResourcesResponse, error) {
	st, err := s.renderAndSubmit(ctx, "update", req.GetProject(), req.GetLogicalCloud(), updateFrom, true)
	if err != nil {
		return nil, err
	}
	return &corev1.UpdateLogicalCloudResourcesResponse{Status: st}, nil
}

// renderAndSubmit is apply and update: the transition that renders the
// logical cloud and hands it to the resource synchronizer.
func (s *Lifecycle) renderAndSubmit(ctx context.Context, verb, project, lc string, from []string, update bool) (*corev1.LogicalCloudStatus, error) {
	return s.transition(ctx, verb, project, lc, from, phaseApplying, s.rollOut(project, lc, update))
}

// rollOut is the act of apply and update (and of a registry change
// followed): render the logical cloud and hand it to the resource
// synchronizer.
func (s *Lifecycle) rollOut(project, lc string, update bool) func(ctx context.Context, c *corev1.LogicalCloud, _ *corev1.LogicalCloudStatus) (int64, error) {
	return func(ctx context.Context, c *corev1.LogicalCloud, _ *corev1.LogicalCloudStatus) (int64, error) {
		r, err := s.render(ctx, project, lc, c)
		if err != nil {
			return 0, err
		}
		namespaces := []string{c.GetSpec().GetNamespace()}
		keep := map[string]bool{}
		if r.mesh.enabled {
			namespaces = append(namespaces, r.mesh.istioNamespace)
			for _, t := range r.targets {
				keep[clusterKey(t.provider, t.cluster)] = true
			}
		}
		for _, ns := range namespaces {
			if err := s.namespaceFree(ctx, project, lc, ns, r.clusters); err != nil {
				return 0, err
			}
		}
		if r.mesh.enabled {
			if err := s.meshes.meshObjectsFree(ctx, project, lc, r.mesh); err != nil {
				return 0, err
			}
		}
		if r.mesh.enabled {
			// The CRDs first: the control plane's custom resources would
			// otherwise wait for them (rsync retries a missing kind).
			if err := s.meshes.joinMesh(ctx, project, lc, r.targets, r.mesh.crds); err != nil {
				return 0, err
			}
		}
		strategy, clusters, err := s.staging(ctx, c.GetSpec().GetRollout(), r.clusters) // rollout.go
		if err != nil {
			return 0, err
		}
		gen, err := s.submitStaged(ctx, rolloutOwner(project, lc), "", strategy, clusters, update)
		if err != nil {
			return 0, err
		}
		// Clusters the logical cloud left, or all of them when its mesh
		// is off now: their CRDs go with their last user. A failure is
		// retried by the next update, terminate or delete.
		ctx = context.WithoutCancel(ctx)
		was, err := s.meshes.leaveMesh(ctx, project, lc, keep)
		if err != nil {
			logging.FromOr(ctx, s.log).Warn("leave mesh clusters", zap.String("logical_cloud", store.Key(project, lc)), zap.Error(err))
		}
		if was && !r.mesh.enabled {
			// Its mesh is off: the control planes leave with this update,
			// and their intermediates are revoked as at terminate; its
			// remote secrets go too.
			if err := s.deletePeers(ctx, project, lc, false); err != nil {
				logging.FromOr(ctx, s.log).Warn("delete the remote secrets", zap.String("logical_cloud", store.Key(project, lc)), zap.Error(err))
			}
			if _, err := s.meshInternal.ReleaseControlPlanes(ctx, &servicemeshv1.ReleaseControlPlanesRequest{Project: project, LogicalCloud: lc}); err != nil {
				logging.FromOr(ctx, s.log).Warn("release control planes", zap.String("logical_cloud", store.Key(project, lc)), zap.Error(err))
			}
		}
		return gen, nil
	}
}

// namespaceFree refuses (409) to apply a logical cloud whose namespace ns
// (its own, or its mesh's Istio namespace) a target cluster already holds
// for someone else: another logical cloud, or nobody DCM knows (made by
// hand, or the cluster's own). Two logical clouds never share a namespace
// on a cluster. The resource synchronizer refuses such an object anyway;
// asking first keeps the other tenant's namespace out of even a failed
// rollout, and names the holder. A cluster that cannot be asked now is
// left to that later refusal.
func (s *rollouts) namespaceFree(ctx context.Context, project, lc, ns string, clusters []*rsyncv1.ClusterResources) error {
	if ns == "" || len(clusters) == 0 {
		return nil
	}
	req := &rsyncv1.GetObjectOwnersRequest{Owner: rolloutOwner(project, lc), ApiVersion: "v1", Kind: "Namespace", Name: ns}
	for _, cl := range clusters {
		req.Clusters = append(req.Clusters, &rsyncv1.ClusterRef{Provider: cl.GetProvider(), Cluster: cl.GetCluster()})
	}
	resp, err := s.rsync.GetObjectOwners(ctx, req)
	if err != nil {
		return err
	}
	for _, o := range resp.GetClusters() {
		where := o.GetProvider() + "/" + o.GetCluster()
		switch o.GetState() {
		case rsyncv1.Ownership_OWNERSHIP_OTHER_OWNER:
			logHolder(s.log, project, lc, "namespace "+ns+" on "+where, o.GetOwner())
			return errs.Because(errs.ReasonOwnedByOther, "namespace %q on cluster %s belongs to %s: two logical clouds never share a namespace; choose another namespace",
				ns, where, ownerFor(project, o.GetOwner()))
		case rsyncv1.Ownership_OWNERSHIP_UNMANAGED:
			return errs.Because(errs.ReasonNotManaged, "namespace %q already exists on cluster %s and was not made by DCM: a logical cloud never takes over a namespace; choose another",
				ns, where)
		}
	}
	return nil
}

// ownerName says who a rollout owner id is, for a message.
func ownerName(owner string) string {
	if rest, ok := strings.CutPrefix(owner, "lc/"); ok {
		if p, l, ok := strings.Cut(rest, "/"); ok {
			return fmt.Sprintf("logical cloud %q of project %q", l, p)
		}
	}
	return strconv.Quote(owner)
}

// submitStaged hands rendered resources to the resource synchronizer as a
// new rollout, or as an update of the existing one, with a rollout strategy
// (nil: every cluster at once; rollout.go). Either falls back to the
// other, so that a rollout submitted just before this program stopped
// (its phase unsaved) is taken over rather than refused. It serves any
// rollout owner (a logical cloud's, a traffic intent group's), whose
// namespaced objects may go in the Namespaces of host besides its own (a
// traffic group's logical cloud; "": none).
func (s *rollouts) submitStaged(ctx context.Context, owner, host string, st *rsyncv1.RolloutStrategy, clusters []*rsyncv1.ClusterResources, update bool) (int64, error) {
	if !update {
		resp, err := s.rsync.SubmitRollout(ctx, &rsyncv1.SubmitRolloutRequest{Owner: owner, HostOwner: host, Clusters: clusters, Strategy: st})
		if errs.Code(err) != codes.AlreadyExists {
			return resp.GetGeneration(), err
		}
	}
	resp, err := s.rsync.UpdateRollout(ctx, &rsyncv1.UpdateRolloutRequest{Owner: owner, HostOwner: host, Clusters: clusters, Strategy: st})
	if update && errs.Code(err) == codes.NotFound {
		sub, err := s.rsync.SubmitRollout(ctx, &rsyncv1.SubmitRolloutRequest{Owner: owner, HostOwner: host, Clusters: clusters, Strategy: st})
		return sub.GetGeneration(), err
	}
	return resp.GetGeneration(), err
}

// StopLogicalCloud implements corev1.LogicalCloudServiceServer.
func (s *Lifecycle) StopLogicalCloud(ctx context.Context, req *corev1.StopLogicalCloudRequest) (*corev1.StopLogicalCloudResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	st, err := s.transition(ctx, "stop", project, lc, stopFrom, "",
		func(ctx context.Context, _ *corev1.LogicalCloud, _ *corev1.LogicalCloudStatus) (int64, error) {
			_, err := s.rsync.StopRollout(ctx, &rsyncv1.StopRolloutRequest{Owner: rolloutOwner(project, lc)})
			return 0, err
		})
	if err != nil {
		return nil, err
	}
	return &corev1.StopLogicalCloudResponse{Status: st}, nil
}

// TerminateLogicalCloud implements corev1.LogicalCloudServiceServer.
func (s *Lifecycle) TerminateLogicalCloud(ctx context.Context, req *corev1.TerminateLogicalCloudRequest) (*corev1.TerminateLogicalCloudResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	owner := rolloutOwner(project, lc)
	if err := mayForce(ctx, req.GetForce()); err != nil {
		return nil, err
	}
	st, err := s.transition(ctx, "terminate", project, lc, terminateFrom, phaseTerminating,
		func(ctx context.Context, _ *corev1.LogicalCloud, st *corev1.LogicalCloudStatus) (int64, error) {
			state := st.GetState()
			if state == StateTerminating && !st.GetStopped() && !req.GetForce() {
				// Asking again would change nothing: the terminate is under
				// way. (EMCO answers so too.)
				return 0, errs.Because(errs.ReasonWrongState, "logical cloud %q is already being terminated: wait for Terminated (GET .../status), "+
					"or stop it and terminate again to resume, or terminate?force=true (an administrator) to leave what cannot be deleted", lc)
			}
			if err := s.traffic.holds(ctx, project, lc); err != nil {
				return 0, err
			}
			// A mesh user (core's mesh records say so) has its control
			// planes released first: the service mesh service revokes the
			// intermediates. Their objects, cacerts included, leave with
			// the rollout below; the CRDs when the last user leaves.
			mesh, err := s.meshes.meshUser(ctx, project, lc)
			if err != nil {
				return 0, err
			}
			if mesh {
				if _, err := s.meshInternal.ReleaseControlPlanes(ctx, &servicemeshv1.ReleaseControlPlanesRequest{Project: project, LogicalCloud: lc}); err != nil {
					return 0, err
				}
			}
			// Its remote secrets (meshpeers.go) go first: they live in
			// the istio namespaces the rollout below deletes.
			if err := s.deletePeers(ctx, project, lc, req.GetForce()); err != nil {
				return 0, err
			}
			gen, err := s.deleteRollout(ctx, owner, state, req.GetForce())
			if err != nil || !mesh {
				return gen, err
			}
			if _, err := s.meshes.leaveMesh(context.WithoutCancel(ctx), project, lc, nil); err != nil {
				// Retried by the delete cascade (or a later apply and terminate).
				logging.FromOr(ctx, s.log).Warn("leave mesh clusters", zap.String("logical_cloud", store.Key(project, lc)), zap.Error(err))
			}
			return gen, nil
		})
	if err != nil {
		return nil, err
	}
	return &corev1.TerminateLogicalCloudResponse{Status: st}, nil
}

// mayForce refuses a forced terminate to anyone but an administrator (or
// a service acting on its own): it leaves objects on clusters.
func mayForce(ctx context.Context, force bool) error {
	if force && !server.MayGrant(ctx) {
		return errs.Forbidden("force", "only an administrator may force a termination: it leaves on unreachable clusters what could not be deleted")
	}
	return nil
}

// deleteRollout deletes the logical cloud's rollout (terminate): from
// TerminateFailed it is stopped first, so that its failures are retried.
// force settles the deletion at once: what is not deleted yet is reported
// orphaned and left on its cluster.
func (s *rollouts) deleteRollout(ctx context.Context, owner, state string, force bool) (int64, error) {
	if state == StateTerminateFailed {
		// A settled deletion is not redone; stopping it first makes the
		// resource synchronizer start a new pass over what failed.
		if _, err := s.rsync.StopRollout(ctx, &rsyncv1.StopRolloutRequest{Owner: owner}); err != nil {
			return 0, err
		}
	}
	resp, err := s.rsync.DeleteRollout(ctx, &rsyncv1.DeleteRolloutRequest{Owner: owner, Force: force})
	if errs.Code(err) == codes.NotFound {
		return 0, nil // nothing was ever submitted
	}
	return resp.GetGeneration(), err
}

// GetLogicalCloudStatus implements corev1.LogicalCloudServiceServer.
func (s *Lifecycle) GetLogicalCloudStatus(ctx context.Context, req *corev1.GetLogicalCloudStatusRequest) (*corev1.GetLogicalCloudStatusResponse, error) {
	c, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	st, err := s.status(ctx, req.GetProject(), req.GetLogicalCloud(), c)
	if err != nil {
		return nil, err
	}
	return &corev1.GetLogicalCloudStatusResponse{Status: st}, nil
}

// WatchLogicalCloudStatus implements corev1.LogicalCloudServiceServer: the
// status now, then at each change until the resource synchronizer has
// settled (every resource applied or deleted, or failed for good).
func (s *Lifecycle) WatchLogicalCloudStatus(req *corev1.WatchLogicalCloudStatusRequest, stream grpc.ServerStreamingServer[corev1.WatchLogicalCloudStatusResponse]) error {
	watchesOpen.Inc()
	defer watchesOpen.Dec()
	// A watch ends cleanly at its maximum, settled or not (a cluster that
	// is down never settles): the client watches again to go on. It ends
	// when the client goes too, through the stream's context.
	//
	// The maximum cancels the calls below rather than giving them a
	// deadline: a deadline travels to rsync, which may give up a moment
	// before this process's timer fires, and its error would then reach
	// the client as a failure. The flag is set before the cancel.
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	var reachedMax atomic.Bool
	if s.watchMax > 0 {
		t := time.AfterFunc(s.watchMax, func() {
			reachedMax.Store(true)
			cancel()
		})
		defer t.Stop()
	}
	atMax := func() bool { return reachedMax.Load() && stream.Context().Err() == nil }
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		if atMax() {
			return nil
		}
		return err
	}
	phase := phaseOf(c)
	// The label changes are the logical cloud's when the watch began.
	view := func(rs *rsyncv1.RolloutStatus) *corev1.LogicalCloudStatus {
		st := statusView(project, lc, phase, rs)
		st.LabelChanges = c.GetLifecycle().GetLabelChanges()
		return st
	}
	if phase == phaseCreated {
		return stream.Send(&corev1.WatchLogicalCloudStatusResponse{Status: view(nil)})
	}
	w, err := s.rsync.WatchRolloutStatus(ctx, &rsyncv1.WatchRolloutStatusRequest{Owner: rolloutOwner(project, lc), UntilSettled: true})
	if err != nil {
		if atMax() {
			return nil
		}
		return err
	}
	for {
		m, err := w.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errs.Code(err) == codes.NotFound:
			return stream.Send(&corev1.WatchLogicalCloudStatusResponse{Status: view(nil)})
		case err != nil && atMax():
			return nil
		case err != nil:
			return err
		}
		if err := stream.Send(&corev1.WatchLogicalCloudStatusResponse{Status: view(m.GetStatus())}); err != nil {
			return err
		}
	}
}

// watchesOpen counts the status watches being served: it goes down when
// one ends at its maximum, settles, or its client goes.
var watchesOpen = promauto.NewGauge(prometheus.GaugeOpts{
	Name: "dcm_core_status_watches_open",
	Help: "Logical cloud status watches being served.",
})

// target is a cluster a logical cloud is on, with its cluster reference's
// loadbalancer-ip (the mesh's east-west gateway address; empty for a
// cluster selected by label only).
type target struct{ provider, cluster, loadbalancerIP string }

// rendered is what a logical cloud puts on its clusters: the rollout, and
// its service mesh (nil for an admin logical cloud).
type rendered struct {
	targets  []target
	clusters []*rsyncv1.ClusterResources
	mesh     *meshRender // enabled false for an admin logical cloud
}

// render asks the namespace, quota and user services for what the logical
// cloud puts on a cluster (the same on each), and the service mesh service
// for each cluster's control plane (docs/mesh.md), and lays it out per
// cluster. Core tells: each request carries what the renderer needs of the
// logical cloud as core holds it (namespace, level, pod security, mesh
// settings, the clusters), so no renderer calls core back.
// An admin logical cloud uses the clusters' own admin access: it renders
// nothing, and its rollout only records which clusters it spans.
func (s *Lifecycle) render(ctx context.Context, project, lc string, c *corev1.LogicalCloud) (*rendered, error) {
	targets, err := s.references.targets(ctx, project, lc, c)
	if err != nil {
		return nil, err
	}
	if len(targets) == 0 {
		return nil, errs.FailedPrecondition("logical cloud %q has no clusters: add cluster references first", lc)
	}
	out := &rendered{targets: targets, mesh: &meshRender{}}
	var manifests []string
	if c.GetSpec().GetLevel() != levelAdmin {
		spec := c.GetSpec()
		out.mesh, err = s.meshes.renderMesh(ctx, project, lc, c, targets)
		if err != nil {
			return nil, err
		}
		ingressFrom, err := s.ingressNamespaces(ctx, project, spec)
		if err != nil {
			return nil, err
		}
		ns, err := s.namespaces.RenderNamespace(ctx, &namespacev1.RenderNamespaceRequest{Project: project, LogicalCloud: lc,
			Namespace: spec.GetNamespace(), Level: spec.GetLevel(), PodSecurity: spec.GetPodSecurity(), IstioRevision: out.mesh.revision,
			Labels: spec.GetLabels(), IstioNamespace: out.mesh.istioNamespace, IngressFrom: ingressFrom})
		if err != nil {
			return nil, err
		}
		quotas, err := s.quotas.RenderQuotas(ctx, &quotav1.RenderQuotasRequest{Project: project, LogicalCloud: lc,
			Namespace: spec.GetNamespace(), Level: spec.GetLevel()})
		if err != nil {
			return nil, err
		}
		users, err := s.users.RenderUsers(ctx, &userv1.RenderUsersRequest{Project: project, LogicalCloud: lc,
			Namespace: spec.GetNamespace(), Level: spec.GetLevel()})
		if err != nil {
			return nil, err
		}
		manifests = slices.Concat(ns.GetManifests(), quotas.GetManifests(), users.GetManifests())
	}
	resources := make([]*rsyncv1.Resource, len(manifests))
	for i, m := range manifests {
		resources[i] = &rsyncv1.Resource{Manifest: m}
	}
	out.clusters = make([]*rsyncv1.ClusterResources, len(targets))
	for i, t := range targets {
		res := resources
		if out.mesh.enabled {
			res = slices.Concat(resources, out.mesh.clusters[clusterKey(t.provider, t.cluster)])
		}
		out.clusters[i] = &rsyncv1.ClusterResources{Provider: t.provider, Cluster: t.cluster, Resources: res}
	}
	return out, nil
}
