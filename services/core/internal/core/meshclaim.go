package core

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// meshObjectsFree refuses (409) to apply a logical cloud whose control
// plane has a cluster-scoped object that a target cluster already holds
// for someone else: its revision's claim (the empty ClusterRole
// "dcm.mesh.revision.<revision>"), its ClusterRoles and bindings, its
// injector and validator webhook configurations. The resource synchronizer
// would refuse such an object too, but only that one, and apply the rest
// (issue 29: a second logical cloud's injector was applied though its
// claim was refused); asking first applies nothing. Namespaces are
// namespaceFree's, the CRDs belong to the cluster's own rollout.
func (s *Meshes) meshObjectsFree(ctx context.Context, project, lc string, m *meshRender) error {
	type ident struct{ apiVersion, kind, name string }
	where := map[ident][]*rsyncv1.ClusterRef{}
	var order []ident
	for _, key := range slices.Sorted(maps.Keys(m.clusters)) {
		provider, cluster, _ := strings.Cut(key, "/")
		for _, res := range m.clusters[key] {
			var o struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name, Namespace string
				} `json:"metadata"`
			}
			if err := json.Unmarshal([]byte(res.GetManifest()), &o); err != nil {
				return errs.Internal(err, "read the service mesh's manifests")
			}
			if o.Metadata.Namespace != "" || o.Kind == "Namespace" || o.Kind == "CustomResourceDefinition" || !clusterScopedMeshKind(o.Kind) {
				continue
			}
			id := ident{o.APIVersion, o.Kind, o.Metadata.Name}
			if _, ok := where[id]; !ok {
				order = append(order, id)
			}
			where[id] = append(where[id], &rsyncv1.ClusterRef{Provider: provider, Cluster: cluster})
		}
	}
	for _, id := range order {
		resp, err := s.rsync.GetObjectOwners(ctx, &rsyncv1.GetObjectOwnersRequest{
			Owner: rolloutOwner(project, lc), ApiVersion: id.apiVersion, Kind: id.kind, Name: id.name, Clusters: where[id]})
		if err != nil {
			return err
		}
		for _, o := range resp.GetClusters() {
			at := o.GetProvider() + "/" + o.GetCluster()
			switch o.GetState() {
			case rsyncv1.Ownership_OWNERSHIP_OTHER_OWNER:
				logHolder(s.log, project, lc, id.kind+" "+id.name+" on "+at, o.GetOwner())
				return errs.Because(errs.ReasonOwnedByOther, "the service mesh's %s %q on cluster %s belongs to %s: "+
					"its revision is taken on that cluster; nothing of this logical cloud was applied", id.kind, id.name, at, ownerFor(project, o.GetOwner()))
			case rsyncv1.Ownership_OWNERSHIP_UNMANAGED:
				return errs.Because(errs.ReasonNotManaged, "the service mesh's %s %q already exists on cluster %s and was not made by DCM: "+
					"nothing of this logical cloud was applied", id.kind, id.name, at)
			}
		}
	}
	return nil
}

// clusterScopedMeshKind lists the cluster-scoped kinds a control plane
// renders (render.checkChartObject allows no other).
func clusterScopedMeshKind(kind string) bool {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		return true
	}
	return false
}
