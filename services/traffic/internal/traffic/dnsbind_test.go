package traffic_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/traffic/internal/dns"
	"github.com/dcm-project/dcm/services/traffic/internal/traffic"
)

// as is ctx acting for a REST caller of project p with role (what the
// gateway forwards).
func as(role string) context.Context {
	return metadata.NewOutgoingContext(context.Background(),
		server.CallerMD(pki.Identity{Subject: "someone", Role: role, Project: "p"}))
}

// TestDNSIntentsAreBound is issue 29's finding 5 at the API, as a
// project-admin sends it: another's txt-owner-id, unsigned updates, a
// server, zone or name the operator did not allow, are refused naming the
// field; the allow-list is the admin's to set; the stored owner id is the
// derived one.
func TestDNSIntentsAreBound(t *testing.T) {
	t.Parallel()
	c, _ := serve(t)
	admin, tenant := context.Background(), as(pki.RoleProjectAdmin)
	_, err := c.CreateTrafficIntentGroup(admin, &trafficv1.CreateTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: "v1",
		TrafficIntentGroup: &trafficv1.TrafficIntentGroup{Name: "g", LogicalCloud: "lc1"}})
	require.NoError(t, err)
	entry := func(change func(map[string]string)) *trafficv1.DnsProviderIntent {
		p := map[string]string{"rfc2136-host": "192.0.2.53", "rfc2136-zone": "example.com", "rfc2136-tsig-keyname": "k"}
		if change != nil {
			change(p)
		}
		return &trafficv1.DnsProviderIntent{Name: "dns", DnsProvider: []*trafficv1.DnsProvider{{Id: "ms1", ExternalName: "svc.example.com",
			ExternalDnsParameters: p, ProviderCredentials: map[string]string{"rfc2136-tsig-secret": "c2VjcmV0"}}}}
	}
	create := func(ctx context.Context, in *trafficv1.DnsProviderIntent) (*trafficv1.DnsProviderIntent, error) {
		r, err := c.CreateDnsProviderIntent(ctx, &trafficv1.CreateDnsProviderIntentRequest{Project: "p", CompositeApp: "app", Version: "v1", Group: "g", DnsProviderIntent: in})
		return r.GetDnsProviderIntent(), err
	}
	const f = "dns_provider_intent.dnsProvider[0]."
	refused := func(err error, code codes.Code, field string) {
		t.Helper()
		require.Equal(t, code, status.Code(err), "%v", err)
		require.Equal(t, f+field, errs.FieldOf(status.Convert(err)), "%v", err)
	}

	// No allow-list: no DNS server at all.
	_, err = create(tenant, entry(nil))
	refused(err, codes.InvalidArgument, "externalDnsParameters.rfc2136-host")

	// The allow-list is the admin's: a project-admin may read it, not set it.
	list := &trafficv1.DnsAllowList{Servers: []string{"192.0.2.53:53", "ns2.example.net:5353"}, Zones: []string{"Example.com."}}
	_, err = c.PutDnsAllowList(tenant, &trafficv1.PutDnsAllowListRequest{Project: "p", DnsAllowList: list})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	_, err = c.PutDnsAllowList(admin, &trafficv1.PutDnsAllowListRequest{Project: "p", DnsAllowList: &trafficv1.DnsAllowList{Servers: []string{"169.254.169.254:53"}}})
	require.Equal(t, "dns_allow_list.servers[0]", errs.FieldOf(status.Convert(err)), "%v", err)
	put, err := c.PutDnsAllowList(admin, &trafficv1.PutDnsAllowListRequest{Project: "p", DnsAllowList: list})
	require.NoError(t, err)
	require.Equal(t, []string{"example.com"}, put.GetDnsAllowList().GetZones(), "normalized")
	got, err := c.GetDnsAllowList(tenant, &trafficv1.GetDnsAllowListRequest{Project: "p"})
	require.NoError(t, err)
	require.Equal(t, put.GetDnsAllowList().GetResourceVersion(), got.GetDnsAllowList().GetResourceVersion())
	stale := &trafficv1.DnsAllowList{Servers: list.Servers, Zones: list.Zones, ResourceVersion: "999"}
	_, err = c.PutDnsAllowList(admin, &trafficv1.PutDnsAllowListRequest{Project: "p", DnsAllowList: stale})
	require.Equal(t, errs.ReasonConcurrentUpdate, errs.ReasonOf(status.Convert(err)), "%v", err)

	// Another's owner id: refused; the stored one is derived.
	_, err = create(tenant, entry(func(p map[string]string) { p["txt-owner-id"] = dns.OwnerID("q/app/v1/g", "dns", "ms1") }))
	refused(err, codes.InvalidArgument, "externalDnsParameters.txt-owner-id")
	// Unsigned updates: admins only.
	_, err = create(tenant, entry(func(p map[string]string) { p["rfc2136-insecure"] = "true" }))
	refused(err, codes.PermissionDenied, "externalDnsParameters.rfc2136-insecure")
	// Servers, ports, zones and names off the allow-list.
	for field, change := range map[string]func(map[string]string){
		"externalDnsParameters.rfc2136-host":  func(p map[string]string) { p["rfc2136-host"] = "127.0.0.1" },
		"externalDnsParameters.rfc2136-port":  func(p map[string]string) { p["rfc2136-port"] = "5353" },
		"externalDnsParameters.rfc2136-zone":  func(p map[string]string) { p["rfc2136-zone"] = "example.org" },
		"externalDnsParameters.domain-filter": func(p map[string]string) { p["domain-filter"] = "example.org" },
	} {
		if field == "externalDnsParameters.rfc2136-port" {
			field = "externalDnsParameters.rfc2136-host" // host:port is what is listed
		}
		_, err = create(tenant, entry(change))
		refused(err, codes.InvalidArgument, field)
	}
	outside := entry(nil)
	outside.DnsProvider[0].ExternalName = "www.example.org"
	_, err = create(tenant, outside)
	refused(err, codes.InvalidArgument, "externalName")

	d, err := create(tenant, entry(nil))
	require.NoError(t, err)
	require.Equal(t, dns.OwnerID("p/app/v1/g", "dns", "ms1"), d.GetDnsProvider()[0].GetExternalDnsParameters()["txt-owner-id"])
	_, err = c.DeleteDnsProviderIntent(admin, &trafficv1.DeleteDnsProviderIntentRequest{Project: "p", CompositeApp: "app", Version: "v1", Group: "g", Name: "dns"})
	require.NoError(t, err)
	// The derived id given back is accepted (an answer's body sent again).
	d.DnsProvider[0].ProviderCredentials = map[string]string{"rfc2136-tsig-secret": "c2VjcmV0"}
	_, err = create(tenant, d)
	require.NoError(t, err)

	// An admin may turn TSIG off.
	_, err = c.DeleteDnsProviderIntent(admin, &trafficv1.DeleteDnsProviderIntentRequest{Project: "p", CompositeApp: "app", Version: "v1", Group: "g", Name: "dns"})
	require.NoError(t, err)
	_, err = create(admin, entry(func(p map[string]string) { p["rfc2136-insecure"] = "true" }))
	require.NoError(t, err)
}

// TestTSIGCredentialsStayWithTheirServer: an update that changes the
// entry's server (host, port) or TSIG algorithm without giving new
// credentials is refused naming the secret, so the stored secret is never
// sent to another server; one that changes nothing else keeps them; new
// ones given with the new server replace them.
func TestTSIGCredentialsStayWithTheirServer(t *testing.T) {
	t.Parallel()
	c, svc := serve(t)
	ctx := context.Background()
	_, err := c.CreateTrafficIntentGroup(ctx, &trafficv1.CreateTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: "v1",
		TrafficIntentGroup: &trafficv1.TrafficIntentGroup{Name: "g", LogicalCloud: "lc1"}})
	require.NoError(t, err)
	_, err = c.PutDnsAllowList(ctx, &trafficv1.PutDnsAllowListRequest{Project: "p", DnsAllowList: &trafficv1.DnsAllowList{
		Servers: []string{"192.0.2.53:53", "192.0.2.54:53", "192.0.2.53:5353"}, Zones: []string{"example.com"}}})
	require.NoError(t, err)
	intent := func(host, port, alg string, creds map[string]string) *trafficv1.DnsProviderIntent {
		p := map[string]string{"rfc2136-host": host, "rfc2136-zone": "example.com", "rfc2136-tsig-keyname": "k"}
		if port != "" {
			p["rfc2136-port"] = port
		}
		if alg != "" {
			p["rfc2136-tsig-secret-alg"] = alg
		}
		return &trafficv1.DnsProviderIntent{DnsProvider: []*trafficv1.DnsProvider{{Id: "ms1", ExternalName: "svc.example.com",
			ExternalDnsParameters: p, ProviderCredentials: creds}}}
	}
	update := func(in *trafficv1.DnsProviderIntent) error {
		_, err := c.UpdateDnsProviderIntent(ctx, &trafficv1.UpdateDnsProviderIntentRequest{Project: "p", CompositeApp: "app", Version: "v1", Group: "g", Name: "ms1", DnsProviderIntent: in})
		return err
	}
	stored := func() map[string]string {
		l, err := svc.Load(ctx, "p", "app", "v1", "g")
		require.NoError(t, err)
		return l.DNS[0].GetDnsProvider()[0].GetProviderCredentials()
	}
	old := map[string]string{"rfc2136-tsig-secret": "b2xk"}
	_, err = c.CreateDnsProviderIntent(ctx, &trafficv1.CreateDnsProviderIntentRequest{Project: "p", CompositeApp: "app", Version: "v1", Group: "g",
		DnsProviderIntent: intent("192.0.2.53", "", "", old)})
	require.NoError(t, err)

	require.NoError(t, update(intent("192.0.2.53", "53", "hmac-sha256", nil)), "the same server, defaults spelled out")
	require.Equal(t, old, stored(), "kept")
	for what, in := range map[string]*trafficv1.DnsProviderIntent{
		"host":      intent("192.0.2.54", "", "", nil),
		"port":      intent("192.0.2.53", "5353", "", nil),
		"algorithm": intent("192.0.2.53", "", "hmac-sha512", nil),
	} {
		err := update(in)
		require.Equal(t, codes.InvalidArgument, status.Code(err), what)
		require.Equal(t, "dns_provider_intent.dnsProvider[0].providerCredentials.rfc2136-tsig-secret", errs.FieldOf(status.Convert(err)), what)
		require.Equal(t, old, stored(), "%s: nothing written", what)
	}
	fresh := map[string]string{"rfc2136-tsig-secret": "bmV3"}
	require.NoError(t, update(intent("192.0.2.54", "", "", fresh)))
	require.Equal(t, fresh, stored(), "the new server's credentials")
}

// TestApplyRechecksTheAllowList: an intent stored under a wider allow-list
// is not applied (nor its run set) once an admin narrowed it.
func TestApplyRechecksTheAllowList(t *testing.T) {
	t.Parallel()
	var svc *traffic.Service
	var runs *dns.Controller
	conn := servertest.Serve(t, func(st *store.Store) []server.Service {
		svc = traffic.New(withClouds(t, st))
		runs = dns.New(st, nil, zap.NewNop(), time.Minute)
		return []server.Service{svc}
	})
	c := trafficv1.NewTrafficServiceClient(conn)
	ctx := context.Background()
	_, err := c.CreateTrafficIntentGroup(ctx, &trafficv1.CreateTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: "v1",
		TrafficIntentGroup: &trafficv1.TrafficIntentGroup{Name: "g", LogicalCloud: "lc1"}})
	require.NoError(t, err)
	put := func(zone string) {
		_, err := c.PutDnsAllowList(ctx, &trafficv1.PutDnsAllowListRequest{Project: "p", DnsAllowList: &trafficv1.DnsAllowList{
			Servers: []string{"192.0.2.53:53"}, Zones: []string{zone}}})
		require.NoError(t, err)
	}
	put("example.com")
	_, err = c.CreateExternalInboundIntent(ctx, &trafficv1.CreateExternalInboundIntentRequest{Project: "p", CompositeApp: "app", Version: "v1", Group: "g",
		ExternalInboundIntent: &trafficv1.ConnectivityIntent{Name: "in", ConnectivityResource: []*trafficv1.ConnectivityResource{{
			Id: "ms1", Name: "svc", Port: 80, ExternalPrefix: "svc", Domain: "example.com"}}}})
	require.NoError(t, err)
	_, err = c.CreateDnsProviderIntent(ctx, &trafficv1.CreateDnsProviderIntentRequest{Project: "p", CompositeApp: "app", Version: "v1", Group: "g",
		DnsProviderIntent: &trafficv1.DnsProviderIntent{Name: "dns", DnsProvider: []*trafficv1.DnsProvider{{Id: "ms1", ExternalName: "svc.example.com",
			ExternalDnsParameters: map[string]string{"rfc2136-host": "192.0.2.53", "rfc2136-zone": "example.com", "rfc2136-tsig-keyname": "k"},
			ProviderCredentials:   map[string]string{"rfc2136-tsig-secret": "c2VjcmV0"}}}}})
	require.NoError(t, err)
	render := func() error {
		_, err := svc.Internal(runs).RenderTrafficIntentGroup(ctx, &trafficv1.RenderTrafficIntentGroupRequest{Project: "p", CompositeApp: "app", Version: "v1",
			Group: "g", LogicalCloud: "lc1", Namespace: "lc1-ns", IstioNamespace: "istio-system",
			Clusters: []*trafficv1.TrafficTarget{{Provider: "edge", Cluster: "c1", LoadbalancerIp: "192.0.2.11"}}})
		return err
	}
	require.NoError(t, render())
	s, err := runs.Status(ctx, "p/app/v1/g")
	require.NoError(t, err)
	require.Len(t, s, 1)

	put("example.net")
	err = render()
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.Equal(t, "dnsproviders/dns: dnsProvider[ms1].externalDnsParameters.rfc2136-zone", errs.FieldOf(status.Convert(err)), "%v", err)
}
