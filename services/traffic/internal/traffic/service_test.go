package traffic_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/facts/factstest"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/traffic/internal/traffic"
)

// withClouds tells the traffic service on st what core would: project p
// has logical cloud lc1 (the facts its group creates check).
func withClouds(t *testing.T, st *store.Store) *store.Store {
	t.Helper()
	clouds := factstest.New(t)
	clouds.Keep(st, "traffic")
	clouds.Add("p", "lc1", "standard", "ns-1")
	return st
}

func serve(t *testing.T) (trafficv1.TrafficServiceClient, *traffic.Service) {
	t.Helper()
	var svc *traffic.Service
	conn := servertest.Serve(t, func(st *store.Store) []server.Service {
		svc = traffic.New(withClouds(t, st))
		return []server.Service{svc}
	})
	return trafficv1.NewTrafficServiceClient(conn), svc
}

func TestGroupsAreScopedToAppVersion(t *testing.T) {
	t.Parallel()
	c, _ := serve(t)
	ctx := context.Background()
	create := func(version, name string) error {
		_, err := c.CreateTrafficIntentGroup(ctx, &trafficv1.CreateTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: version,
			TrafficIntentGroup: &trafficv1.TrafficIntentGroup{Metadata: &typesv1.Metadata{Name: name}, LogicalCloud: "lc1"}})
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

// TestGroupLifecycle: the logical cloud is checked, nothing is left of a
// refused create, an applied group is not deleted, a deleted group takes
// its intents along, and Load unseals DNS credentials that no answer shows.
func TestGroupLifecycle(t *testing.T) {
	t.Parallel()
	c, svc := serve(t)
	ctx := context.Background()
	grp := func(lc string) *trafficv1.CreateTrafficIntentGroupRequest {
		return &trafficv1.CreateTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: "v1",
			TrafficIntentGroup: &trafficv1.TrafficIntentGroup{Name: "g", Description: "d", LogicalCloud: lc, Applied: true}}
	}
	_, err := c.CreateTrafficIntentGroup(ctx, grp("other"))
	require.Equal(t, "traffic_intent_group.logical-cloud", errs.FieldOf(status.Convert(err)), "%v", err)
	got, err := c.CreateTrafficIntentGroup(ctx, grp("lc1"))
	require.NoError(t, err, "the refused create left nothing behind")
	require.False(t, got.GetTrafficIntentGroup().GetApplied(), "applied is output only")
	require.Equal(t, "g", got.GetTrafficIntentGroup().GetMetadata().GetName())
	require.Equal(t, "d", got.GetTrafficIntentGroup().GetMetadata().GetDescription())

	_, err = c.PutDnsAllowList(ctx, &trafficv1.PutDnsAllowListRequest{Project: "p", DnsAllowList: &trafficv1.DnsAllowList{
		Servers: []string{"10.0.0.53:53"}, Zones: []string{"example.com"}}})
	require.NoError(t, err)
	dns := &trafficv1.DnsProviderIntent{DnsProvider: []*trafficv1.DnsProvider{{
		Id: "ms1", ExternalName: "svc.example.com",
		ExternalDnsParameters: map[string]string{"rfc2136-host": "10.0.0.53", "rfc2136-zone": "example.com"},
		ProviderCredentials:   map[string]string{"rfc2136-tsig-secret": "c2VjcmV0"},
	}}}
	d, err := c.CreateDnsProviderIntent(ctx, &trafficv1.CreateDnsProviderIntentRequest{Project: "p", CompositeApp: "app", Version: "v1", Group: "g", DnsProviderIntent: dns})
	require.NoError(t, err)
	require.Equal(t, "ms1", d.GetDnsProviderIntent().GetName())
	require.Empty(t, d.GetDnsProviderIntent().GetDnsProvider()[0].GetProviderCredentials())
	require.Equal(t, []string{"rfc2136-tsig-secret"}, d.GetDnsProviderIntent().GetDnsProvider()[0].GetCredentialKeys())

	// An update without credentials keeps the stored ones.
	dns.DnsProvider[0].ProviderCredentials = nil
	dns.Description = "new"
	_, err = c.UpdateDnsProviderIntent(ctx, &trafficv1.UpdateDnsProviderIntentRequest{Project: "p", CompositeApp: "app", Version: "v1", Group: "g", Name: "ms1", DnsProviderIntent: dns})
	require.NoError(t, err)
	l, err := svc.Load(ctx, "p", "app", "v1", "g")
	require.NoError(t, err)
	require.Len(t, l.DNS, 1)
	require.Equal(t, "new", l.DNS[0].GetDescription())
	require.Equal(t, map[string]string{"rfc2136-tsig-secret": "c2VjcmV0"}, l.DNS[0].GetDnsProvider()[0].GetProviderCredentials())

	_, err = c.CreateIntraclusterIntent(ctx, &trafficv1.CreateIntraclusterIntentRequest{Project: "p", CompositeApp: "app", Version: "v1", Group: "nope",
		IntraclusterIntent: &trafficv1.ConnectivityIntent{ConnectivityResource: []*trafficv1.ConnectivityResource{{Id: "a", Name: "a", Port: 80}}}})
	require.Equal(t, codes.NotFound, status.Code(err), "an intent needs its group")

	require.NoError(t, svc.SetApplied(ctx, "p", "app", "v1", "g", true))
	del := &trafficv1.DeleteTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: "v1", Name: "g"}
	_, err = c.DeleteTrafficIntentGroup(ctx, del)
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Equal(t, errs.ReasonWrongState, errs.ReasonOf(status.Convert(err)))
	require.NoError(t, svc.SetApplied(ctx, "p", "app", "v1", "g", false))
	_, err = c.DeleteTrafficIntentGroup(ctx, del)
	require.NoError(t, err)

	// Recreated, the group has no intents of its old self.
	_, err = c.CreateTrafficIntentGroup(ctx, grp("lc1"))
	require.NoError(t, err)
	l, err = svc.Load(ctx, "p", "app", "v1", "g")
	require.NoError(t, err)
	require.Empty(t, l.DNS)
}

func TestGroupUpdateChangesDescriptionOnly(t *testing.T) {
	t.Parallel()
	c, _ := serve(t)
	ctx := context.Background()
	_, err := c.CreateTrafficIntentGroup(ctx, &trafficv1.CreateTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: "v1",
		TrafficIntentGroup: &trafficv1.TrafficIntentGroup{Name: "g", LogicalCloud: "lc1"}})
	require.NoError(t, err)
	upd := func(g *trafficv1.TrafficIntentGroup) (*trafficv1.UpdateTrafficIntentGroupResponse, error) {
		return c.UpdateTrafficIntentGroup(ctx, &trafficv1.UpdateTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: "v1", Name: "g", TrafficIntentGroup: g})
	}
	_, err = upd(&trafficv1.TrafficIntentGroup{Name: "h", LogicalCloud: "lc1"})
	require.Equal(t, "traffic_intent_group.name", errs.FieldOf(status.Convert(err)))
	_, err = upd(&trafficv1.TrafficIntentGroup{LogicalCloud: "lc2"})
	require.Equal(t, "traffic_intent_group.logical-cloud", errs.FieldOf(status.Convert(err)))
	got, err := upd(&trafficv1.TrafficIntentGroup{Description: "x", LogicalCloud: "lc1"})
	require.NoError(t, err)
	require.Equal(t, "x", got.GetTrafficIntentGroup().GetDescription())
	require.Equal(t, "lc1", got.GetTrafficIntentGroup().GetLogicalCloud())
}
