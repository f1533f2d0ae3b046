package core

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	factsv1 "github.com/dcm-project/dcm/gen/dcm/facts/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// factsPeer is a service's facts contract as core calls it: the real
// server over a real copy, its puts counted; unlisted makes its list fail
// as a program from before the list would.
type factsPeer struct {
	srv      *facts.Server
	puts     atomic.Int64
	lists    atomic.Int64
	unlisted bool
}

func (f *factsPeer) PutLogicalCloudFacts(ctx context.Context, in *factsv1.PutLogicalCloudFactsRequest, _ ...grpc.CallOption) (*factsv1.PutLogicalCloudFactsResponse, error) {
	f.puts.Add(1)
	return f.srv.PutLogicalCloudFacts(ctx, in)
}

func (f *factsPeer) DeleteLogicalCloudFacts(ctx context.Context, in *factsv1.DeleteLogicalCloudFactsRequest, _ ...grpc.CallOption) (*factsv1.DeleteLogicalCloudFactsResponse, error) {
	return f.srv.DeleteLogicalCloudFacts(ctx, in)
}

func (f *factsPeer) ListLogicalCloudFacts(ctx context.Context, in *factsv1.ListLogicalCloudFactsRequest, _ ...grpc.CallOption) (*factsv1.ListLogicalCloudFactsResponse, error) {
	f.lists.Add(1)
	if f.unlisted {
		return nil, status.Error(codes.Unimplemented, "unknown method ListLogicalCloudFacts")
	}
	return f.srv.ListLogicalCloudFacts(ctx, in)
}

// TestReconcileTellsOnlyWhatDiffers: a round tells a service the facts of
// the logical clouds it does not hold as core's records say (missing,
// stale clusters, wrong level), and nothing else; a service that cannot
// list its facts is told every logical cloud; a logical cloud being
// deleted is left to the cleanup.
func TestReconcileTellsOnlyWhatDiffers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t)
	clouds := cloudRecords(st)
	refs := store.NewRecords(st, ClusterReferencesCollection, "cluster reference",
		func() *corev1.ClusterReference { return &corev1.ClusterReference{} })
	copyOf := facts.Open(st, "quota")
	peer := &factsPeer{srv: facts.Serve(copyOf)}
	f := &Facts{clouds: clouds, refs: refs, locks: replicaLocks(st, 0, 30*time.Second), peers: []FactsPeer{{Name: "quota", Client: peer}}, log: zap.NewNop()}

	n, err := f.ReconcileFacts(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, peer.lists.Load(), "with no logical cloud no service is called")

	for _, name := range []string{"a", "b", "c", "d", "e"} {
		lc := &corev1.LogicalCloud{Metadata: &typesv1.Metadata{Name: name}, Spec: &corev1.LogicalCloudSpec{Level: "standard", Namespace: name}}
		require.NoError(t, clouds.Create(ctx, store.Key("p", name), "p", lc))
	}
	require.NoError(t, refs.Create(ctx, store.Key("p", "a", "edge", "c1"), store.Key("p", "a"),
		&corev1.ClusterReference{ClusterProvider: "edge", ClusterName: "c1"}))
	_, err = clouds.MarkDeleting(ctx, store.Key("p", "e"))
	require.NoError(t, err)

	n, err = f.ReconcileFacts(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n, "the first round tells the four live logical clouds")
	require.EqualValues(t, 4, peer.puts.Load())
	held, err := copyOf.Parent(ctx, "p", "a")
	require.NoError(t, err)
	require.Equal(t, []string{"edge/c1"}, held.GetClusters())

	n, err = f.ReconcileFacts(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a round where every fact is held tells none")
	require.EqualValues(t, 4, peer.puts.Load())

	require.NoError(t, copyOf.Delete(ctx, "p", "b"))                                                                            // lost
	require.NoError(t, copyOf.Put(ctx, &typesv1.LogicalCloudFacts{Project: "p", Name: "a", Level: "standard", Namespace: "a"})) // its cluster missed
	require.NoError(t, copyOf.Put(ctx, &typesv1.LogicalCloudFacts{Project: "p", Name: "c", Level: "admin", Namespace: "c"}))    // wrong
	n, err = f.ReconcileFacts(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n, "a, b and c are told again, d is not")
	require.EqualValues(t, 7, peer.puts.Load())
	for name, want := range map[string]*typesv1.LogicalCloudFacts{
		"a": {Project: "p", Name: "a", Level: "standard", Namespace: "a", Clusters: []string{"edge/c1"}},
		"b": {Project: "p", Name: "b", Level: "standard", Namespace: "b"},
		"c": {Project: "p", Name: "c", Level: "standard", Namespace: "c"},
	} {
		held, err := copyOf.Parent(ctx, "p", name)
		require.NoError(t, err)
		require.Equal(t, want.String(), held.String(), name)
	}

	peer.unlisted = true
	n, err = f.ReconcileFacts(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n, "a service that cannot list is told every live logical cloud")
}
