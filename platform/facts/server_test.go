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
