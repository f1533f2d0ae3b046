package core

import (
	"context"
	"errors"
	"slices"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/logging"
	"github.com/dcm-project/dcm/platform/store"
)

// The service mesh in core (docs/mesh.md, docs/lifecycle.md "Service
// mesh"): at apply and update core tells the service mesh service what it
// holds of a logical cloud and gets, per cluster, the control plane's
// objects (added to the logical cloud's rollout) and Istio's CRDs.
// The CRDs are cluster-scoped and shared by every mesh-enabled logical
// cloud on a cluster, so they belong to no logical cloud: each cluster has
// a rollout of its own, owner "mesh/<provider>/<cluster>", and core's
// record of the cluster (collection mesh_clusters) lists the logical clouds
// that use it. The rollout is submitted or updated when a logical cloud
// joins, and deleted when the last one leaves (terminate, an update that
// drops the cluster or disables the mesh, or the delete cascade). Changes
// of one cluster's record and rollout are serialized by a lock per cluster
// (one core replica, as for the lifecycle); the record's writes are
// conditional on the version read as well.

// Meshes are core's mesh records of the clusters and their CRD rollouts
// (mesh.go), the claims of a control plane's cluster-scoped objects
// (meshclaim.go) and the bound on a project's meshes (meshlimit.go).
type Meshes struct {
	clouds       *store.Records[*corev1.LogicalCloud]
	meshes       *store.Records[*corev1.StoredMeshCluster]
	meshLocks    *keyLocks
	rsync        rsyncv1.RsyncInternalServiceClient
	meshInternal servicemeshv1.ServiceMeshInternalServiceClient
	log          *zap.Logger
	// MaxMeshes is how many logical clouds of a project may have the
	// service mesh enabled (DCM_MAX_MESHES_PER_PROJECT, meshlimit.go); 0
	// is no maximum.
	maxMeshes int
}

// meshOwner is the resource synchronizer's owner id of a cluster's Istio
// CRDs.
func meshOwner(provider, cluster string) string { return "mesh/" + provider + "/" + cluster }

// meshRender is what the service mesh service answered for a logical
// cloud: per cluster its control plane's objects, and the CRDs.
type meshRender struct {
	enabled        bool
	revision       string
	istioNamespace string
	crds           []string
	// clusters holds the control plane's objects by cluster key.
	clusters map[string][]*rsyncv1.Resource
}

// renderMesh asks the service mesh service for a (non-admin) logical
// cloud's control planes, telling it what core holds: the namespace, the
// level, spec.service-mesh, spec.ca-root and the clusters with their
// references' loadbalancer-ip. It answers enabled=false for a logical cloud
// without a mesh.
func (s *Meshes) renderMesh(ctx context.Context, project, lc string, c *corev1.LogicalCloud, targets []target) (*meshRender, error) {
	spec := c.GetSpec()
	req := &servicemeshv1.RenderControlPlanesRequest{Project: project, LogicalCloud: lc, Namespace: spec.GetNamespace(),
		Level: spec.GetLevel(), Enabled: spec.GetServiceMesh().GetEnabled(), IstioNamespace: spec.GetServiceMesh().GetNamespace(),
		CaRoot: spec.GetCaRoot()}
	for _, t := range targets {
		req.Clusters = append(req.Clusters, &servicemeshv1.MeshTarget{Provider: t.provider, Cluster: t.cluster, LoadbalancerIp: t.loadbalancerIP})
	}
	resp, err := s.meshInternal.RenderControlPlanes(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &meshRender{enabled: resp.GetEnabled()}
	if !out.enabled {
		return out, nil
	}
	out.revision, out.istioNamespace, out.crds = resp.GetRevision(), resp.GetIstioNamespace(), resp.GetCrds()
	out.clusters = map[string][]*rsyncv1.Resource{}
	for _, cm := range resp.GetClusters() {
		var res []*rsyncv1.Resource
		for _, m := range cm.GetManifests() {
			res = append(res, &rsyncv1.Resource{Manifest: m.GetJson(), Sensitive: m.GetSensitive()})
		}
		out.clusters[clusterKey(cm.GetProvider(), cm.GetCluster())] = res
	}
	return out, nil
}

func clusterKey(provider, cluster string) string { return provider + "/" + cluster }

// joinMesh records logical cloud lc of project as a mesh user of each
// cluster and submits (or updates) the cluster's CRD rollout with crds.
// A cluster whose CRDs are still being deleted (the last user left a
// moment ago) is 409 STILL_DELETING: retry shortly. A cluster that fails
// is not left listing lc unless it did before.
func (s *Meshes) joinMesh(ctx context.Context, project, lc string, clusters []target, crds []string) error {
	user := store.Key(project, lc)
	for _, t := range clusters {
		if err := s.joinCluster(ctx, user, t, crds); err != nil {
			return err
		}
	}
	return nil
}

func (s *Meshes) joinCluster(ctx context.Context, user string, t target, crds []string) error {
	key := clusterKey(t.provider, t.cluster)
	ctx, unlock, err := s.meshLocks.lock(ctx, key, "cluster "+key)
	if err != nil {
		return err
	}
	defer unlock()
	added, err := s.changeMeshRecord(ctx, t, func(users []string) []string {
		if slices.Contains(users, user) {
			return users
		}
		users = append(users, user)
		slices.Sort(users)
		return users
	})
	if err != nil {
		return err
	}
	if err := s.submitCRDs(ctx, t, crds); err != nil {
		if added {
			if _, uerr := s.changeMeshRecord(context.WithoutCancel(ctx), t, func(users []string) []string {
				return slices.DeleteFunc(users, func(u string) bool { return u == user })
			}); uerr != nil {
				logging.FromOr(ctx, s.log).Warn("mesh cluster: undo join", zap.String("cluster", key), zap.String("logical_cloud", user), zap.Error(uerr))
			}
		}
		return err
	}
	return nil
}

// submitCRDs makes the cluster's CRD rollout hold crds.
func (s *Meshes) submitCRDs(ctx context.Context, t target, crds []string) error {
	owner := meshOwner(t.provider, t.cluster)
	cr := &rsyncv1.ClusterResources{Provider: t.provider, Cluster: t.cluster}
	for _, m := range crds {
		cr.Resources = append(cr.Resources, &rsyncv1.Resource{Manifest: m})
	}
	clusters := []*rsyncv1.ClusterResources{cr}
	_, err := s.rsync.SubmitRollout(ctx, &rsyncv1.SubmitRolloutRequest{Owner: owner, Clusters: clusters})
	if errs.Code(err) != codes.AlreadyExists {
		return err
	}
	_, err = s.rsync.UpdateRollout(ctx, &rsyncv1.UpdateRolloutRequest{Owner: owner, Clusters: clusters})
	if errs.Code(err) == codes.FailedPrecondition {
		return errs.Because(errs.ReasonStillDeleting, "the Istio CRDs of cluster %s/%s are being removed (the last mesh-enabled logical cloud left it): retry shortly", t.provider, t.cluster)
	}
	return err
}

// leaveMesh removes logical cloud lc of project from the mesh record of
// every cluster but those in keep (by cluster key), deleting the CRD
// rollout of a cluster it was the last user of. It reports whether lc was
// a mesh user anywhere, kept clusters included.
func (s *Meshes) leaveMesh(ctx context.Context, project, lc string, keep map[string]bool) (bool, error) {
	user := store.Key(project, lc)
	recs, err := s.meshes.List(ctx, "")
	if err != nil {
		return false, err
	}
	was := false
	var failed []error
	for _, r := range recs {
		if !slices.Contains(r.GetLogicalClouds(), user) {
			continue
		}
		was = true
		if keep[clusterKey(r.GetProvider(), r.GetCluster())] {
			continue
		}
		if err := s.leaveCluster(ctx, user, target{provider: r.GetProvider(), cluster: r.GetCluster()}); err != nil {
			failed = append(failed, err)
		}
	}
	return was, errors.Join(failed...)
}

func (s *Meshes) leaveCluster(ctx context.Context, user string, t target) error {
	key := clusterKey(t.provider, t.cluster)
	ctx, unlock, err := s.meshLocks.lock(ctx, key, "cluster "+key)
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := s.meshes.Get(ctx, key)
	if errs.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		return err
	}
	users := slices.DeleteFunc(slices.Clone(cur.Msg.GetLogicalClouds()), func(u string) bool { return u == user })
	if len(users) > 0 {
		rec := &corev1.StoredMeshCluster{Provider: t.provider, Cluster: t.cluster, LogicalClouds: users}
		return s.meshes.Update(ctx, key, cur.Version, rec)
	}
	// The last user: the CRDs go, then the record (a failed delete leaves
	// the record listing the user, so that the next try deletes again).
	_, err = s.rsync.DeleteRollout(ctx, &rsyncv1.DeleteRolloutRequest{Owner: meshOwner(t.provider, t.cluster)})
	if err != nil && errs.Code(err) != codes.NotFound {
		return err
	}
	s.log.Info("last mesh-enabled logical cloud left the cluster: its Istio CRDs are deleted", zap.String("cluster", key), zap.String("logical_cloud", user))
	if err := s.meshes.Delete(ctx, key); err != nil && errs.Code(err) != codes.NotFound {
		return err
	}
	return nil
}

// changeMeshRecord rewrites the users of cluster t's mesh record with
// change (creating it if missing), conditionally on the version read, and
// reports whether the list changed.
func (s *Meshes) changeMeshRecord(ctx context.Context, t target, change func([]string) []string) (bool, error) {
	key := clusterKey(t.provider, t.cluster)
	cur, err := s.meshes.Get(ctx, key)
	switch {
	case errs.Code(err) == codes.NotFound:
		users := change(nil)
		if len(users) == 0 {
			return false, nil
		}
		return true, s.meshes.Create(ctx, key, "", &corev1.StoredMeshCluster{Provider: t.provider, Cluster: t.cluster, LogicalClouds: users})
	case err != nil:
		return false, err
	}
	before := slices.Clone(cur.Msg.GetLogicalClouds())
	users := change(slices.Clone(before))
	if slices.Equal(before, users) {
		return false, nil
	}
	rec := &corev1.StoredMeshCluster{Provider: t.provider, Cluster: t.cluster, LogicalClouds: users}
	return true, s.meshes.Update(ctx, key, cur.Version, rec)
}

// meshUser says whether logical cloud lc of project is listed as a mesh
// user of any cluster.
func (s *Meshes) meshUser(ctx context.Context, project, lc string) (bool, error) {
	user := store.Key(project, lc)
	recs, err := s.meshes.List(ctx, "")
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(recs, func(r *corev1.StoredMeshCluster) bool { return slices.Contains(r.GetLogicalClouds(), user) }), nil
}
