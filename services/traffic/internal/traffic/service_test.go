package traffic_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/traffic/internal/traffic"
)

func TestGroupsAreScopedToAppVersion(t *testing.T) {
	t.Parallel()
	c := trafficv1.NewTrafficServiceClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		return []server.Service{traffic.New(st)}
	}))
	ctx := context.Background()
	create := func(version, name string) error {
		_, err := c.CreateTrafficIntentGroup(ctx, &trafficv1.CreateTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: version,
			TrafficIntentGroup: &trafficv1.TrafficIntentGroup{Metadata: &typesv1.Metadata{Name: name}}})
		return err
	}
	require.NoError(t, create("v1", "g1"))
	require.NoError(t, create("v1", "g2"))
	require.NoError(t, create("v2", "g1"))
	require.Equal(t, codes.AlreadyExists, status.Code(create("v1", "g1")))
	require.Equal(t, codes.InvalidArgument, status.Code(create("V1", "g1")))

	list, err := c.ListTrafficIntentGroups(ctx, &trafficv1.ListTrafficIntentGroupsRequest{Project: "p", CompositeApp: "app", Version: "v1"})
	require.NoError(t, err)
	require.Len(t, list.GetTrafficIntentGroups(), 2)
	_, err = c.DeleteTrafficIntentGroup(ctx, &trafficv1.DeleteTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: "v1", Name: "g1"})
	require.NoError(t, err)
	_, err = c.GetTrafficIntentGroup(ctx, &trafficv1.GetTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: "v2", Name: "g1"})
	require.NoError(t, err, "the other version's group is untouched")
}
