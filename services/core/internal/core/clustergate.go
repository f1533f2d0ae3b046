package core

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// gate answers whether a project may use a cluster: the sets bound to it
// (live bindings, live sets) as read once, with the labels of the
// clusters it has looked up.
type gate struct {
	c       *ClusterSets
	project string
	sets    []*corev1.ClusterSet
	// labels caches each looked-up cluster's registry labels, by
	// "provider/cluster" (nil: not registered).
	labels map[string][]string
}

// gate reads the sets bound to project.
func (c *ClusterSets) gate(ctx context.Context, project string) (*gate, error) {
	bs, err := c.bindings.List(ctx, project)
	if err != nil {
		return nil, err
	}
	g := &gate{c: c, project: project, labels: map[string][]string{}}
	for _, b := range bs {
		s, err := c.sets.Get(ctx, b.GetClusterSet())
		if errs.Code(err) == codes.NotFound {
			continue // being deleted: its deletion found no binding, or refuses
		}
		if err != nil {
			return nil, err
		}
		g.sets = append(g.sets, s.Msg)
	}
	return g, nil
}

// admits says whether a set of g's admits cluster provider/cluster.
func (g *gate) admits(ctx context.Context, provider, cluster string) (bool, error) {
	for _, s := range g.sets {
		in, err := g.inSet(ctx, s.GetSpec(), provider, cluster)
		if in || err != nil {
			return in, err
		}
	}
	return false, nil
}

// inSet says whether set spec sp holds cluster provider/cluster.
func (g *gate) inSet(ctx context.Context, sp *corev1.ClusterSetSpec, provider, cluster string) (bool, error) {
	if sp.GetAllClusters() {
		return true, nil
	}
	for _, m := range sp.GetClusters() {
		if m.GetClusterProvider() == provider && m.GetClusterName() == cluster {
			return true, nil
		}
	}
	if p := sp.GetClusterProvider(); p != "" && p != provider {
		return false, nil
	}
	want := sp.GetClusterLabels()
	if len(want) == 0 {
		return sp.GetClusterProvider() != "", nil
	}
	has, err := g.labelsOf(ctx, provider, cluster)
	if err != nil {
		return false, err
	}
	for _, l := range want {
		if !slices.Contains(has, l) {
			return false, nil
		}
	}
	return true, nil
}

// labelsOf reads a cluster's labels in the registry (none if it is not
// registered), once per gate.
func (g *gate) labelsOf(ctx context.Context, provider, cluster string) ([]string, error) {
	k := clusterKey(provider, cluster)
	if l, ok := g.labels[k]; ok {
		return l, nil
	}
	resp, err := g.c.registry.GetCluster(ctx, &rsyncv1.GetClusterRequest{Provider: provider, Name: cluster})
	if err != nil && errs.Code(err) != codes.NotFound {
		return nil, err
	}
	l := resp.GetCluster().GetSpec().GetLabels()
	g.labels[k] = l
	return l, nil
}

// refused are the clusters ("provider/cluster") of keys that g does not
// admit.
func (g *gate) refused(ctx context.Context, keys []string) ([]string, error) {
	var out []string
	for _, k := range keys {
		provider, cluster, _ := strings.Cut(k, "/")
		ok, err := g.admits(ctx, provider, cluster)
		if err != nil {
			return nil, err
		}
		if !ok {
			out = append(out, k)
		}
	}
	return out, nil
}

// outside says, for a reason, that clusters are in none of the project's
// sets, and which are bound.
func (g *gate) outside(clusters []string) string {
	var names []string
	for _, s := range g.sets {
		names = append(names, s.GetMetadata().GetName())
	}
	bound := "it has none bound"
	if len(names) > 0 {
		bound = "bound: " + strings.Join(names, ", ")
	}
	what := "cluster " + clusters[0] + " is"
	if len(clusters) > 1 {
		what = "clusters " + strings.Join(clusters, ", ") + " are"
	}
	return fmt.Sprintf("%s in none of project %s's cluster sets (%s)", what, g.project, bound)
}

// refuse is the 403 for clusters outside g's sets, naming field, the
// clusters and the rule.
func (g *gate) refuse(field string, clusters []string) error {
	return errs.Forbidden(field, "%s: a project's logical clouds may use only clusters of the cluster sets bound to it (an admin binds one: POST /v2/projects/%s/cluster-set-bindings)",
		g.outside(clusters), g.project)
}

// check refuses (403, field) cluster provider/cluster unless a set bound
// to project admits it.
func (c *ClusterSets) check(ctx context.Context, project, field, provider, cluster string) error {
	g, err := c.gate(ctx, project)
	if err != nil {
		return err
	}
	ok, err := g.admits(ctx, provider, cluster)
	if err != nil || ok {
		return err
	}
	return g.refuse(field, []string{clusterKey(provider, cluster)})
}

// checkSelected refuses (403 naming cluster-labels) label-selected
// clusters that project's sets do not all admit.
func (c *ClusterSets) checkSelected(ctx context.Context, project string, selected []*rsyncv1.SelectedCluster) error {
	if len(selected) == 0 {
		return nil
	}
	g, err := c.gate(ctx, project)
	if err != nil {
		return err
	}
	var keys []string
	for _, sc := range selected {
		keys = append(keys, clusterKey(sc.GetProvider(), sc.GetName()))
	}
	out, err := g.refused(ctx, keys)
	if err != nil || len(out) == 0 {
		return err
	}
	return g.refuse("cluster-labels", out)
}
