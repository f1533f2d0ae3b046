package core

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// boundTo lists project's bindings.
func boundTo(t *testing.T, c *ClusterSets, project string) []string {
	t.Helper()
	resp, err := c.ListClusterSetBindings(context.Background(), &corev1.ListClusterSetBindingsRequest{Project: project})
	require.NoError(t, err)
	var out []string
	for _, b := range resp.GetBindings() {
		out = append(out, b.GetClusterSet())
	}
	return out
}

// TestDefaultClusterSetAtUpgrade: the first start with cluster sets (no
// set stored) makes the default set of every cluster and binds it to the
// projects already there; a new project is bound to it. A later start
// leaves an operator's narrowing alone: a project unbound from it is not
// bound again. With DCM_DEFAULT_CLUSTER_SET empty, nothing is made and a
// new project has no set.
func TestDefaultClusterSetAtUpgrade(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t)
	for _, p := range []string{"old-1", "old-2"} {
		require.NoError(t, projectRecords(st).Create(ctx, p, "", &corev1.Project{Metadata: &typesv1.Metadata{Name: p}}))
	}
	sets := NewClusterSets(st, nil, nil, "default", zap.NewNop())
	require.NoError(t, sets.EnsureDefault(ctx))
	got, err := sets.GetClusterSet(ctx, &corev1.GetClusterSetRequest{Name: "default"})
	require.NoError(t, err)
	require.True(t, got.GetClusterSet().GetSpec().GetAllClusters())
	require.Equal(t, []string{"default"}, boundTo(t, sets, "old-1"))
	require.Equal(t, []string{"default"}, boundTo(t, sets, "old-2"))

	projects := NewProjects(st, sets)
	_, err = projects.CreateProject(ctx, &corev1.CreateProjectRequest{Metadata: &typesv1.Metadata{Name: "new"}})
	require.NoError(t, err)
	require.Equal(t, []string{"default"}, boundTo(t, sets, "new"))

	// The operator narrows old-1; a restart does not undo it.
	err = sets.unbind(ctx, "old-1", "default")
	require.NoError(t, err)
	require.NoError(t, NewClusterSets(st, nil, nil, "default", zap.NewNop()).EnsureDefault(ctx))
	require.Empty(t, boundTo(t, sets, "old-1"))

	// A first start that stopped after binding one project (before the
	// set, its mark, was made) is done again whole at the next.
	st3 := storetest.Open(t)
	half := NewClusterSets(st3, nil, nil, "default", zap.NewNop())
	for _, p := range []string{"x", "y"} {
		require.NoError(t, projectRecords(st3).Create(ctx, p, "", &corev1.Project{Metadata: &typesv1.Metadata{Name: p}}))
	}
	require.NoError(t, half.bindings.Create(ctx, "x/default", "x", &corev1.ClusterSetBinding{ClusterSet: "default"}))
	require.NoError(t, half.EnsureDefault(ctx))
	require.Equal(t, []string{"default"}, boundTo(t, half, "x"))
	require.Equal(t, []string{"default"}, boundTo(t, half, "y"))
	_, err = half.GetClusterSet(ctx, &corev1.GetClusterSetRequest{Name: "default"})
	require.NoError(t, err)

	// Off: a fresh installation gets no set, a new project no binding.
	st2 := storetest.Open(t)
	off := NewClusterSets(st2, nil, nil, "", zap.NewNop())
	require.NoError(t, off.EnsureDefault(ctx))
	_, err = NewProjects(st2, off).CreateProject(ctx, &corev1.CreateProjectRequest{Metadata: &typesv1.Metadata{Name: "p"}})
	require.NoError(t, err)
	require.Empty(t, boundTo(t, off, "p"))
	list, err := off.ListClusterSets(ctx, &corev1.ListClusterSetsRequest{})
	require.NoError(t, err)
	require.Empty(t, list.GetClusterSets())
}

// registryLabels is the cluster registry's GetCluster over a map of
// clusters' labels (pure logic: the gate's rules).
type registryLabels struct {
	rsyncv1.RsyncServiceClient
	labels map[string][]string
	reads  int
}

func (r *registryLabels) GetCluster(_ context.Context, req *rsyncv1.GetClusterRequest, _ ...grpc.CallOption) (*rsyncv1.GetClusterResponse, error) {
	r.reads++
	l, ok := r.labels[clusterKey(req.GetProvider(), req.GetName())]
	if !ok {
		return nil, errs.NotFound("cluster %q not found", req.GetName())
	}
	return &rsyncv1.GetClusterResponse{Cluster: &rsyncv1.Cluster{Spec: &rsyncv1.ClusterSpec{Labels: l}}}, nil
}

// TestClusterSetRules: a set holds the clusters it names, those of its
// provider, those carrying all its labels (of its provider if given), or
// every cluster; a label is read from the registry once per gate.
func TestClusterSetRules(t *testing.T) {
	ctx := context.Background()
	reg := &registryLabels{labels: map[string][]string{
		"edge/a": {"zone-a", "gpu"}, "edge/b": {"zone-b"}, "core/c": {"zone-a", "gpu"},
	}}
	set := func(sp *corev1.ClusterSetSpec) *corev1.ClusterSet {
		return &corev1.ClusterSet{Metadata: &typesv1.Metadata{Name: "s"}, Spec: sp}
	}
	for _, tc := range []struct {
		name  string
		spec  *corev1.ClusterSetSpec
		admit []string
	}{
		{"all", &corev1.ClusterSetSpec{AllClusters: true}, []string{"edge/a", "edge/b", "core/c", "edge/unregistered"}},
		{"by name", &corev1.ClusterSetSpec{Clusters: []*corev1.ClusterSetMember{{ClusterProvider: "edge", ClusterName: "b"}}}, []string{"edge/b"}},
		{"by provider", &corev1.ClusterSetSpec{ClusterProvider: "core"}, []string{"core/c"}},
		{"by labels", &corev1.ClusterSetSpec{ClusterLabels: []string{"zone-a", "gpu"}}, []string{"edge/a", "core/c"}},
		{"by labels of a provider", &corev1.ClusterSetSpec{ClusterLabels: []string{"zone-a"}, ClusterProvider: "edge"}, []string{"edge/a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gate{c: &ClusterSets{registry: reg}, project: "p", sets: []*corev1.ClusterSet{set(tc.spec)}, labels: map[string][]string{}}
			all := []string{"edge/a", "edge/b", "core/c", "edge/unregistered"}
			refused, err := g.refused(ctx, all)
			require.NoError(t, err)
			var admitted []string
			for _, k := range all {
				if !slices.Contains(refused, k) {
					admitted = append(admitted, k)
				}
			}
			require.ElementsMatch(t, tc.admit, admitted)
		})
	}
	reg.reads = 0
	g := &gate{c: &ClusterSets{registry: reg}, project: "p", labels: map[string][]string{},
		sets: []*corev1.ClusterSet{set(&corev1.ClusterSetSpec{ClusterLabels: []string{"x"}}), set(&corev1.ClusterSetSpec{ClusterLabels: []string{"y"}})}}
	_, err := g.refused(ctx, []string{"edge/a", "edge/a"})
	require.NoError(t, err)
	require.Equal(t, 1, reg.reads, "one registry read per cluster and gate")
	err = g.refuse("cluster-name", []string{"edge/a"})
	require.Equal(t, codes.PermissionDenied, errs.Code(err))
	require.Contains(t, err.Error(), "cluster-name: cluster edge/a is in none of project p's cluster sets (bound: s, s)")
	g.sets = nil
	require.Contains(t, g.refuse("cluster-labels", []string{"edge/a", "edge/b"}).Error(), "clusters edge/a, edge/b are in none of project p's cluster sets (it has none bound)")
}

// TestUnbindRacesReference: an unbinding and a cluster reference's
// creation (its record written, then checked, as addReference does) run
// at once, round after round, each started after a different number of
// yields: a reference is never left without the binding that admits it.
// Both may be refused (each saw the other); one alone may win.
func TestUnbindRacesReference(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t)
	sets := NewClusterSets(st, nil, nil, "", zap.NewNop())
	require.NoError(t, sets.projects.Create(ctx, "p", "", &corev1.Project{Metadata: &typesv1.Metadata{Name: "p"}}))
	require.NoError(t, sets.clouds.Create(ctx, "p/lc", "p", &corev1.LogicalCloud{Metadata: &typesv1.Metadata{Name: "lc"}}))
	s := &corev1.ClusterSet{Metadata: &typesv1.Metadata{Name: "s"}, Spec: &corev1.ClusterSetSpec{
		Clusters: []*corev1.ClusterSetMember{{ClusterProvider: "edge", ClusterName: "c"}}}}
	require.NoError(t, sets.sets.Create(ctx, "s", "", s))
	ref := &corev1.ClusterReference{ClusterProvider: "edge", ClusterName: "c"}
	outcomes := map[string]int{}
	for i := range 60 {
		require.NoError(t, sets.bindings.Create(ctx, "p/s", "p", &corev1.ClusterSetBinding{ClusterSet: "s"}))
		var unbindErr, refErr error
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range i % 12 {
				runtime.Gosched()
			}
			unbindErr = sets.unbind(ctx, "p", "s")
		}()
		for range (i / 12) % 5 {
			runtime.Gosched()
		}
		refErr = sets.refs.CreateChecked(ctx, "p/lc/edge/c", "p/lc", ref, func(ctx context.Context) error {
			return sets.check(ctx, "p", "cluster-name", "edge", "c")
		})
		<-done
		_, berr := sets.bindings.Get(ctx, "p/s")
		_, rerr := sets.refs.Get(ctx, "p/lc/edge/c")
		bound, referenced := berr == nil, rerr == nil
		require.False(t, referenced && !bound, "round %d: unbind %v, reference %v: a reference outlived its binding", i, unbindErr, refErr)
		outcomes[fmt.Sprintf("unbind %s, reference %s", errs.Code(unbindErr), errs.Code(refErr))]++
		if referenced {
			require.NoError(t, sets.refs.Delete(ctx, "p/lc/edge/c"))
		}
		if bound {
			require.NoError(t, sets.unbind(ctx, "p", "s"))
		}
	}
	t.Logf("outcomes: %v", outcomes)
}
