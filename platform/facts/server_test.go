package facts_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	factsv1 "github.com/dcm-project/dcm/gen/dcm/facts/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

type other struct{ name string }

func (other) Register(grpc.ServiceRegistrar) {}

// TestMergeTellsEveryCopy: on one gRPC server the services' facts
// contracts become one registration, in the first one's place, whose puts
// and deletes reach every service's copy.
func TestMergeTellsEveryCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t)
	ns, users := facts.Open(st, "namespace"), facts.Open(st, "user")
	a, b := other{"a"}, other{"b"}
	merged := facts.Merge([]server.Service{a, facts.Serve(ns), b, facts.Serve(users)})
	require.Len(t, merged, 3)
	require.Equal(t, a, merged[0])
	require.Equal(t, b, merged[2])
	srv, ok := merged[1].(*facts.Server)
	require.True(t, ok)

	g := grpc.NewServer()
	for _, s := range merged {
		s.Register(g) // a second registration of the contract would end the process
	}
	require.Contains(t, g.GetServiceInfo(), factsv1.LogicalCloudFactsInternalService_ServiceDesc.ServiceName)

	_, err := srv.PutLogicalCloudFacts(ctx, &factsv1.PutLogicalCloudFactsRequest{Facts: &typesv1.LogicalCloudFacts{Project: "p", Name: "lc", Level: "standard"}})
	require.NoError(t, err)
	for _, c := range []*facts.Facts{ns, users} {
		_, err := c.Parent(ctx, "p", "lc")
		require.NoError(t, err, "every copy is told")
	}
	_, err = srv.DeleteLogicalCloudFacts(ctx, &factsv1.DeleteLogicalCloudFactsRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	for _, c := range []*facts.Facts{ns, users} {
		_, err := c.Parent(ctx, "p", "lc")
		require.Equal(t, codes.NotFound, errs.Code(err), "every copy forgets")
	}
	_, err = srv.PutLogicalCloudFacts(ctx, &factsv1.PutLogicalCloudFactsRequest{Facts: &typesv1.LogicalCloudFacts{Name: "lc"}})
	require.Equal(t, codes.InvalidArgument, errs.Code(err), "a put without its project is refused")
}

// TestListFactsHeldByEveryCopy: the facts listed are those every copy
// holds as they are, a page at a time, in project and name order, so that
// core's reconcile tells only the others.
func TestListFactsHeldByEveryCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t)
	ns, users := facts.Open(st, "namespace"), facts.Open(st, "user")
	srv := facts.Serve(ns, users)
	put := func(c *facts.Facts, f *typesv1.LogicalCloudFacts) { require.NoError(t, c.Put(ctx, f)) }
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		f := &typesv1.LogicalCloudFacts{Project: "p", Name: name, Level: "standard", Clusters: []string{"edge/c1"}}
		put(ns, f)
		if name != "b" {
			put(users, f) // the user service never got b
		}
	}
	put(users, &typesv1.LogicalCloudFacts{Project: "p", Name: "d", Level: "standard"}) // nor d's clusters
	put(ns, &typesv1.LogicalCloudFacts{Project: "o", Name: "z", Level: "admin"})
	put(users, &typesv1.LogicalCloudFacts{Project: "o", Name: "z", Level: "admin"})

	var names []string
	req := &factsv1.ListLogicalCloudFactsRequest{PageSize: 2}
	pages := 0
	for {
		resp, err := srv.ListLogicalCloudFacts(ctx, req)
		require.NoError(t, err)
		pages++
		for _, f := range resp.GetFacts() {
			names = append(names, f.GetProject()+"/"+f.GetName())
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	require.Equal(t, []string{"o/z", "p/a", "p/c", "p/e"}, names)
	require.Equal(t, 3, pages, "6 in the first copy, 2 a page")

	_, err := srv.ListLogicalCloudFacts(ctx, &factsv1.ListLogicalCloudFactsRequest{PageToken: "not a token"})
	require.Equal(t, codes.InvalidArgument, errs.Code(err))
}
