package traffic_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// TestGroupWithoutLogicalCloud: seed 004's group body, {name,
// description}, is a group that names no logical cloud yet; its intents
// may be added; it gets one, once, by update (checked as a create's);
// then it never changes. A project the service knows no logical cloud of
// has no such group.
func TestGroupWithoutLogicalCloud(t *testing.T) {
	t.Parallel()
	c, _ := serve(t)
	ctx := context.Background()
	create := func(project string) (*trafficv1.CreateTrafficIntentGroupResponse, error) {
		return c.CreateTrafficIntentGroup(ctx, &trafficv1.CreateTrafficIntentGroupRequest{Project: project, CompositeApp: "app", Version: "v1",
			TrafficIntentGroup: &trafficv1.TrafficIntentGroup{Name: "john", Description: "Traffic intent groups"}})
	}
	got, err := create("p")
	require.NoError(t, err)
	require.Equal(t, "", got.GetTrafficIntentGroup().GetLogicalCloud())
	_, err = create("nowhere")
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	require.Contains(t, err.Error(), `project "nowhere" has no logical cloud`)
	_, err = c.GetTrafficIntentGroup(ctx, &trafficv1.GetTrafficIntentGroupRequest{Project: "nowhere", CompositeApp: "app", Version: "v1", Name: "john"})
	require.Equal(t, codes.NotFound, status.Code(err), "the refused create left nothing behind")

	_, err = c.CreateIntraclusterIntent(ctx, &trafficv1.CreateIntraclusterIntentRequest{Project: "p", CompositeApp: "app", Version: "v1", Group: "john",
		IntraclusterIntent: &trafficv1.ConnectivityIntent{ConnectivityResource: []*trafficv1.ConnectivityResource{{Id: "a", Name: "a", Port: 80}}}})
	require.NoError(t, err)

	upd := func(lc string) (*trafficv1.UpdateTrafficIntentGroupResponse, error) {
		return c.UpdateTrafficIntentGroup(ctx, &trafficv1.UpdateTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: "v1", Name: "john",
			TrafficIntentGroup: &trafficv1.TrafficIntentGroup{Description: "Traffic intent groups", LogicalCloud: lc}})
	}
	_, err = upd("other")
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.Equal(t, "traffic_intent_group.logical-cloud", errs.FieldOf(status.Convert(err)))
	u, err := upd("")
	require.NoError(t, err)
	require.Equal(t, "", u.GetTrafficIntentGroup().GetLogicalCloud(), "none given, none set")
	u, err = upd("lc1")
	require.NoError(t, err)
	require.Equal(t, "lc1", u.GetTrafficIntentGroup().GetLogicalCloud())
	g, err := c.GetTrafficIntentGroup(ctx, &trafficv1.GetTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: "v1", Name: "john"})
	require.NoError(t, err)
	require.Equal(t, "lc1", g.GetTrafficIntentGroup().GetLogicalCloud())
	_, err = upd("lc2")
	require.Equal(t, "traffic_intent_group.logical-cloud", errs.FieldOf(status.Convert(err)), "set once, it never changes")
}
