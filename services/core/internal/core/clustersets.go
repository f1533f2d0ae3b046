package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// Cluster sets (docs/fleet.md, "Cluster sets"): an admin names sets of
// registered clusters (by name, by label selector over the registry, by
// provider, or all of them) and binds them to projects. A project's
// logical clouds may use only clusters of the sets bound to it: a cluster
// reference (addReference), a cluster-labels selection (Clouds.create,
// References.targets, Labels) and a traffic intent's clusters
// (TrafficRollouts, at apply and update) naming another cluster are
// refused with 403, nothing stored.
//
// Races: a reference is written before its cluster is checked against
// the project's bindings (CreateChecked), and an unbinding marks the
// binding (MarkDeleting) before it looks for the project's references, so
// one of the two always sees the other: either the check no longer finds
// the binding (403) or the unbinding finds the reference (409). A PUT of a
// set writes the new spec first and then looks, writing the old one back
// if it must refuse; a binding is checked against its set and project the
// same way a set's and project's deletions look for bindings.

// ClusterSets is the part that stores cluster sets and their bindings to
// projects (CoreService's RPCs, admin only) and answers whether a project
// may use a cluster (gate).
type ClusterSets struct {
	sets     *store.Records[*corev1.ClusterSet]
	bindings *store.Records[*corev1.ClusterSetBinding]
	projects *store.Records[*corev1.Project]
	clouds   *store.Records[*corev1.LogicalCloud]
	refs     *store.Records[*corev1.ClusterReference]
	// registry reads a cluster's labels (label-selected sets).
	registry rsyncv1.RsyncServiceClient
	// rsync selects clusters by label (logical clouds' cluster-labels).
	rsync rsyncv1.RsyncInternalServiceClient
	// defaultSet is DCM_DEFAULT_CLUSTER_SET: the all-clusters set made
	// at first start and bound to every new project ("": none).
	defaultSet string
	log        *zap.Logger
}

// NewClusterSets opens the cluster set collections on st.
func NewClusterSets(st *store.Store, registry rsyncv1.RsyncServiceClient, rsync rsyncv1.RsyncInternalServiceClient, defaultSet string, log *zap.Logger) *ClusterSets {
	return &ClusterSets{
		sets: store.NewRecords(st, ClusterSetsCollection, "cluster set", func() *corev1.ClusterSet { return &corev1.ClusterSet{} }),
		bindings: store.NewRecords(st, ClusterSetBindingsCollection, "cluster set binding",
			func() *corev1.ClusterSetBinding { return &corev1.ClusterSetBinding{} }),
		projects: projectRecords(st), clouds: cloudRecords(st),
		refs: store.NewRecords(st, ClusterReferencesCollection, "cluster reference",
			func() *corev1.ClusterReference { return &corev1.ClusterReference{} }),
		registry: registry, rsync: rsync, defaultSet: defaultSet, log: log,
	}
}

// adminOnly refuses (403) a change of cluster sets or bindings by anyone
// but an admin (or a service on its own): the gateway lets a
// project-admin call every method under its project, bindings included,
// and a project that bound itself a set would defeat them.
func adminOnly(ctx context.Context, what string) error {
	if server.MayGrant(ctx) {
		return nil
	}
	return errs.Forbidden("", "only an admin %s: cluster sets say which clusters each project may use", what)
}

// checkSet refuses a set spec that names no cluster, mixes all-clusters
// with another rule or names a cluster twice (protovalidate checks the
// names and labels).
func checkSet(s *corev1.ClusterSet) error {
	sp := s.GetSpec()
	if sp.GetAllClusters() && (len(sp.GetClusters()) > 0 || len(sp.GetClusterLabels()) > 0 || sp.GetClusterProvider() != "") {
		return errs.Invalid("cluster_set.spec.all-clusters", "stands alone: a set of every cluster has no clusters, cluster-labels or cluster-provider")
	}
	if !sp.GetAllClusters() && len(sp.GetClusters()) == 0 && len(sp.GetClusterLabels()) == 0 && sp.GetClusterProvider() == "" {
		return errs.Invalid("cluster_set.spec", "names no cluster: give clusters, cluster-labels, cluster-provider or all-clusters")
	}
	seen := map[string]bool{}
	for i, m := range sp.GetClusters() {
		k := clusterKey(m.GetClusterProvider(), m.GetClusterName())
		if seen[k] {
			return errs.Invalid(fmt.Sprintf("cluster_set.spec.clusters[%d]", i), "names cluster %s twice", k)
		}
		seen[k] = true
	}
	return nil
}

// CreateClusterSet implements corev1.CoreServiceServer.
func (c *ClusterSets) CreateClusterSet(ctx context.Context, req *corev1.CreateClusterSetRequest) (*corev1.CreateClusterSetResponse, error) {
	s := req.GetClusterSet()
	if err := adminOnly(ctx, "creates cluster sets"); err != nil {
		return nil, err
	}
	if err := checkSet(s); err != nil {
		return nil, err
	}
	if err := c.sets.Create(ctx, s.GetMetadata().GetName(), "", s); err != nil {
		return nil, err
	}
	return &corev1.CreateClusterSetResponse{ClusterSet: s}, nil
}

// GetClusterSet implements corev1.CoreServiceServer.
func (c *ClusterSets) GetClusterSet(ctx context.Context, req *corev1.GetClusterSetRequest) (*corev1.GetClusterSetResponse, error) {
	s, err := c.sets.Get(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &corev1.GetClusterSetResponse{ClusterSet: s.Msg}, nil
}

// ListClusterSets implements corev1.CoreServiceServer.
func (c *ClusterSets) ListClusterSets(ctx context.Context, req *corev1.ListClusterSetsRequest) (*corev1.ListClusterSetsResponse, error) {
	ss, next, err := c.sets.ListPage(ctx, "", store.PageOf(req))
	if err != nil {
		return nil, err
	}
	return &corev1.ListClusterSetsResponse{ClusterSets: ss, NextPageToken: next}, nil
}

// UpdateClusterSet implements corev1.CoreServiceServer. The new spec is
// written first, then every project the set is bound to is looked at: if
// one would keep a logical cloud on a cluster none of its sets admits any
// more, the old spec is written back and the answer is 409 naming them.
func (c *ClusterSets) UpdateClusterSet(ctx context.Context, req *corev1.UpdateClusterSetRequest) (*corev1.UpdateClusterSetResponse, error) {
	name, s := req.GetName(), req.GetClusterSet()
	if err := adminOnly(ctx, "changes cluster sets"); err != nil {
		return nil, err
	}
	if n := s.GetMetadata().GetName(); n != name {
		return nil, errs.Invalid("cluster_set.metadata.name", "must equal the set in the path (%q), got %q", name, n)
	}
	if err := checkSet(s); err != nil {
		return nil, err
	}
	cur, err := c.sets.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := c.sets.Update(ctx, name, cur.Version, s); err != nil {
		return nil, err
	}
	old := cur.Msg
	err = c.stillAdmitted(ctx, name, func(bound []*corev1.ClusterSet) []*corev1.ClusterSet {
		return append(slices.DeleteFunc(slices.Clone(bound), func(o *corev1.ClusterSet) bool { return o.GetMetadata().GetName() == name }), old)
	})
	if err != nil {
		// Back to the old spec, conditionally on the set being as this
		// request left it (another PUT since is not undone).
		if gerr := c.sets.Update(context.WithoutCancel(ctx), name, cur.Version+1, old); gerr != nil {
			return nil, errors.Join(err, fmt.Errorf("write cluster set %q back: %w", name, gerr))
		}
		return nil, err
	}
	return &corev1.UpdateClusterSetResponse{ClusterSet: s}, nil
}

// stillAdmitted looks at every project set name is bound to: each cluster
// its logical clouds use (before, given the sets bound as they are now)
// must be admitted by its sets as they are now; 409 naming those that are
// not.
func (c *ClusterSets) stillAdmitted(ctx context.Context, name string, before func(bound []*corev1.ClusterSet) []*corev1.ClusterSet) error {
	bs, err := c.bindings.Match(ctx, map[string]string{"cluster_set": name})
	if err != nil {
		return err
	}
	var lost []string
	for _, b := range bs {
		project := b.Parent
		g, err := c.gate(ctx, project)
		if err != nil {
			return err
		}
		on, err := c.lost(ctx, project, &gate{c: c, project: project, sets: before(g.sets), labels: g.labels}, g)
		if err != nil {
			return err
		}
		if on != "" {
			lost = append(lost, fmt.Sprintf("project %s: %s", project, on))
		}
	}
	if len(lost) > 0 {
		return errs.Because(errs.ReasonReferenced, "cluster set %q would no longer admit clusters that logical clouds use (%s): remove those cluster references first, or bind the projects a set that admits them",
			name, strings.Join(lost, "; "))
	}
	return nil
}

// DeleteClusterSet implements corev1.CoreServiceServer: refused (409
// naming the projects) while the set is bound. The set is marked first,
// so a binding made meanwhile either finds it gone or is found here.
func (c *ClusterSets) DeleteClusterSet(ctx context.Context, req *corev1.DeleteClusterSetRequest) (*corev1.DeleteClusterSetResponse, error) {
	name := req.GetName()
	if err := adminOnly(ctx, "deletes cluster sets"); err != nil {
		return nil, err
	}
	if _, err := c.sets.MarkDeleting(ctx, name); err != nil {
		return nil, err
	}
	bs, err := c.bindings.Match(ctx, map[string]string{"cluster_set": name})
	if err == nil && len(bs) > 0 {
		var projects []string
		for _, b := range bs {
			projects = append(projects, b.Parent)
		}
		err = errs.Because(errs.ReasonReferenced, "cluster set %q is bound to projects %s: unbind it first (DELETE /v2/projects/{project}/cluster-set-bindings/%s)",
			name, strings.Join(projects, ", "), name)
	}
	if err != nil {
		if uerr := c.sets.Unmark(context.WithoutCancel(ctx), name); uerr != nil {
			return nil, errors.Join(err, uerr)
		}
		return nil, err
	}
	if err := c.sets.Delete(ctx, name); err != nil {
		return nil, err
	}
	return &corev1.DeleteClusterSetResponse{}, nil
}

// CreateClusterSetBinding implements corev1.CoreServiceServer. The
// binding is stored, then its project and set are checked (each is
// marked before it is deleted, and their deletions look for bindings).
func (c *ClusterSets) CreateClusterSetBinding(ctx context.Context, req *corev1.CreateClusterSetBindingRequest) (*corev1.CreateClusterSetBindingResponse, error) {
	project, set := req.GetProject(), req.GetClusterSet()
	if err := adminOnly(ctx, "binds cluster sets to projects"); err != nil {
		return nil, err
	}
	b := &corev1.ClusterSetBinding{ClusterSet: set}
	err := c.bindings.CreateChecked(ctx, store.Key(project, set), project, b, func(ctx context.Context) error {
		if _, err := c.projects.Get(ctx, project); err != nil {
			return err
		}
		_, err := c.sets.Get(ctx, set)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &corev1.CreateClusterSetBindingResponse{Binding: b}, nil
}

// GetClusterSetBinding implements corev1.CoreServiceServer.
func (c *ClusterSets) GetClusterSetBinding(ctx context.Context, req *corev1.GetClusterSetBindingRequest) (*corev1.GetClusterSetBindingResponse, error) {
	if _, err := c.projects.Get(ctx, req.GetProject()); err != nil {
		return nil, err
	}
	b, err := c.bindings.Get(ctx, store.Key(req.GetProject(), req.GetClusterSet()))
	if err != nil {
		return nil, err
	}
	return &corev1.GetClusterSetBindingResponse{Binding: b.Msg}, nil
}

// ListClusterSetBindings implements corev1.CoreServiceServer.
func (c *ClusterSets) ListClusterSetBindings(ctx context.Context, req *corev1.ListClusterSetBindingsRequest) (*corev1.ListClusterSetBindingsResponse, error) {
	if _, err := c.projects.Get(ctx, req.GetProject()); err != nil {
		return nil, err
	}
	bs, next, err := c.bindings.ListPage(ctx, req.GetProject(), store.PageOf(req))
	if err != nil {
		return nil, err
	}
	return &corev1.ListClusterSetBindingsResponse{Bindings: bs, NextPageToken: next}, nil
}

// DeleteClusterSetBinding implements corev1.CoreServiceServer: refused
// (409 naming the logical clouds and clusters) while the project has
// logical clouds on clusters that only this set admits. The binding is
// marked first, so that a cluster reference checked meanwhile no longer
// counts it (its check reads live bindings) or is found here.
func (c *ClusterSets) DeleteClusterSetBinding(ctx context.Context, req *corev1.DeleteClusterSetBindingRequest) (*corev1.DeleteClusterSetBindingResponse, error) {
	if err := adminOnly(ctx, "unbinds cluster sets from projects"); err != nil {
		return nil, err
	}
	if err := c.unbind(ctx, req.GetProject(), req.GetClusterSet()); err != nil {
		return nil, err
	}
	return &corev1.DeleteClusterSetBindingResponse{}, nil
}

// unbind removes the binding of set to project, unless the project has
// logical clouds on clusters only that set admits.
func (c *ClusterSets) unbind(ctx context.Context, project, set string) error {
	key := store.Key(project, set)
	if _, err := c.bindings.MarkDeleting(ctx, key); err != nil {
		return err
	}
	err := func() error {
		after, err := c.gate(ctx, project)
		if err != nil {
			return err
		}
		before := &gate{c: c, project: project, sets: after.sets, labels: after.labels}
		if s, err := c.sets.Get(ctx, set); err == nil {
			before.sets = append(slices.Clone(after.sets), s.Msg)
		} else if errs.Code(err) != codes.NotFound {
			return err
		}
		on, err := c.lost(ctx, project, before, after)
		if err != nil || on == "" {
			return err
		}
		return errs.Because(errs.ReasonReferenced, "project %q has logical clouds on clusters only cluster set %q admits: %s; remove those cluster references (or bind a set that admits them) first",
			project, set, on)
	}()
	if err != nil {
		if uerr := c.bindings.Unmark(context.WithoutCancel(ctx), key); uerr != nil {
			return errors.Join(err, uerr)
		}
		return err
	}
	return c.bindings.Delete(ctx, key)
}

// lost names the logical clouds of project on clusters that before
// admits and after does not, with those clusters ("lc-1 (edge/c1)"; ""
// if none). A logical cloud is on a cluster it references, and on those
// its cluster-labels select that before admits.
func (c *ClusterSets) lost(ctx context.Context, project string, before, after *gate) (string, error) {
	clouds, err := c.clouds.Children(ctx, project)
	if err != nil {
		return "", err
	}
	var out []string
	for _, lc := range clouds {
		name := strings.TrimPrefix(lc.ID, project+"/")
		refs, err := c.refs.List(ctx, lc.ID)
		if err != nil {
			return "", err
		}
		var on []string
		for _, r := range refs {
			on = append(on, clusterKey(r.GetClusterProvider(), r.GetClusterName()))
		}
		if labels := lc.Msg.GetSpec().GetClusterLabels(); len(labels) > 0 {
			sel, err := c.rsync.SelectClusters(ctx, &rsyncv1.SelectClustersRequest{Labels: labels})
			if err != nil {
				return "", err
			}
			for _, sc := range sel.GetClusters() {
				ok, err := before.admits(ctx, sc.GetProvider(), sc.GetName())
				if err != nil {
					return "", err
				}
				if ok {
					on = append(on, clusterKey(sc.GetProvider(), sc.GetName()))
				}
			}
		}
		var gone []string
		for _, k := range slices.Compact(slices.Sorted(slices.Values(on))) {
			provider, cluster, _ := strings.Cut(k, "/")
			ok, err := after.admits(ctx, provider, cluster)
			if err != nil {
				return "", err
			}
			if !ok {
				gone = append(gone, k)
			}
		}
		if len(gone) > 0 {
			out = append(out, fmt.Sprintf("%s (%s)", name, strings.Join(gone, ", ")))
		}
	}
	return strings.Join(out, ", "), nil
}

// bindDefault binds the default set, if there is one, to new project.
func (c *ClusterSets) bindDefault(ctx context.Context, project string) error {
	if c.defaultSet == "" {
		return nil
	}
	if _, err := c.sets.Get(ctx, c.defaultSet); errs.Code(err) == codes.NotFound {
		return nil // deleted by an admin: new projects get no set
	} else if err != nil {
		return err
	}
	err := c.bindings.Create(ctx, store.Key(project, c.defaultSet), project, &corev1.ClusterSetBinding{ClusterSet: c.defaultSet})
	if errs.Code(err) == codes.AlreadyExists {
		return nil
	}
	return err
}

// EnsureDefault makes the default set (every cluster) when no cluster set
// exists at all (a new installation, or one from before cluster sets) and
// binds it to every project there is: today's behaviour, until an admin
// narrows it. Once any set exists it does nothing, so a default set an
// admin deleted is not made again while other sets exist.
//
// The projects are bound before the set is made, the set being the mark
// that it was done: a start that stopped half way does it again. They are
// read again once it is made: a project created meanwhile either found
// the set (CreateProject binds it) or is read then.
func (c *ClusterSets) EnsureDefault(ctx context.Context) error {
	if c.defaultSet == "" {
		return nil
	}
	all, err := c.sets.Match(ctx, nil)
	if err != nil || len(all) > 0 {
		return err
	}
	n, err := c.bindAll(ctx)
	if err != nil {
		return err
	}
	set := &corev1.ClusterSet{
		Metadata: &typesv1.Metadata{Name: c.defaultSet, Description: "every registered cluster: made by core at first start (DCM_DEFAULT_CLUSTER_SET) and bound to every project"},
		Spec:     &corev1.ClusterSetSpec{AllClusters: true},
	}
	if err := c.sets.Create(ctx, c.defaultSet, "", set); err != nil && errs.Code(err) != codes.AlreadyExists {
		return err
	}
	more, err := c.bindAll(ctx)
	if err != nil {
		return err
	}
	c.log.Info("default cluster set made and bound to the projects", zap.String("cluster_set", c.defaultSet), zap.Int("projects", n+more))
	return nil
}

// bindAll binds the default set to every live project not bound to it
// yet, and says to how many.
func (c *ClusterSets) bindAll(ctx context.Context) (int, error) {
	projects, err := c.projects.Match(ctx, nil)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range projects {
		if p.Deleting {
			continue
		}
		err := c.bindings.Create(ctx, store.Key(p.ID, c.defaultSet), p.ID, &corev1.ClusterSetBinding{ClusterSet: c.defaultSet})
		switch {
		case err == nil:
			n++
		case errs.Code(err) != codes.AlreadyExists && errs.Code(err) != codes.FailedPrecondition:
			return n, err
		}
	}
	return n, nil
}

// unbindAll removes project's bindings (the project's deletion, after it
// is marked: a binding made meanwhile finds the project gone).
func (c *ClusterSets) unbindAll(ctx context.Context, project string) error {
	_, err := c.bindings.DeleteUnder(ctx, project)
	return err
}
