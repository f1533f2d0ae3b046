package quota_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/quota/internal/quota"
)

func amounts(kv ...string) []*quotav1.ResourceAmount {
	var out []*quotav1.ResourceAmount
	for i := 0; i < len(kv); i += 2 {
		out = append(out, &quotav1.ResourceAmount{Resource: kv[i], Quantity: kv[i+1]})
	}
	return out
}

func TestQuotas(t *testing.T) {
	t.Parallel()
	c := quotav1.NewQuotaServiceClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		return []server.Service{quota.New(st)}
	}))
	ctx := context.Background()
	create := func(name string, hard []*quotav1.ResourceAmount) (*quotav1.CreateQuotaResponse, error) {
		return c.CreateQuota(ctx, &quotav1.CreateQuotaRequest{Project: "p", LogicalCloud: "lc",
			Quota: &quotav1.Quota{Metadata: &typesv1.Metadata{Name: name}, Hard: hard}})
	}
	resp, err := create("q1", amounts("cpu", "2000m", "limits.memory", "1Gi", "requests.nvidia.com/gpu", "2", "dummy/dummyResource", "1", "pods", "10"))
	require.NoError(t, err)
	require.Equal(t, "2", resp.GetQuota().GetHard()[0].GetQuantity(), "stored canonical")

	got, err := c.GetQuota(ctx, &quotav1.GetQuotaRequest{Project: "p", LogicalCloud: "lc", Name: "q1"})
	require.NoError(t, err)
	require.Len(t, got.GetQuota().GetHard(), 5)
	require.Equal(t, "requests.nvidia.com/gpu", got.GetQuota().GetHard()[2].GetResource(), "dotted names survive the store")

	bad := []struct {
		hard  []*quotav1.ResourceAmount
		field string
	}{
		{amounts("cpu", "two"), "quota.hard[0].quantity"},
		{amounts("cpu", "-1"), "quota.hard[0].quantity"},
		{amounts("cpu", "1", "cpu", "2"), "quota.hard[1].resource"},
		{amounts("bad resource!", "1"), "quota.hard[0].resource"},
		{amounts("", "1"), "quota.hard[0].resource"},
	}
	for _, b := range bad {
		_, err := create("q2", b.hard)
		st, _ := status.FromError(err)
		require.Equal(t, codes.InvalidArgument, st.Code(), "%v", b.hard)
		require.Equal(t, b.field, errs.FieldOf(st))
	}
	list, err := c.ListQuotas(ctx, &quotav1.ListQuotasRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Len(t, list.GetQuotas(), 1, "no bad quota was stored")

	_, err = c.DeleteQuota(ctx, &quotav1.DeleteQuotaRequest{Project: "p", LogicalCloud: "lc", Name: "q1"})
	require.NoError(t, err)
	_, err = c.GetQuota(ctx, &quotav1.GetQuotaRequest{Project: "p", LogicalCloud: "lc", Name: "q1"})
	require.Equal(t, codes.NotFound, status.Code(err))
}
