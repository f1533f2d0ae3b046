package traffic

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/status"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/services/traffic/internal/dns"
)

// fieldOf is the field an error names ("" for none).
func fieldOf(err error) string {
	if err == nil {
		return ""
	}
	return errs.FieldOf(status.Convert(err))
}

func resource(id string, clients ...*trafficv1.ClientService) *trafficv1.ConnectivityResource {
	return &trafficv1.ConnectivityResource{Id: id, Name: id, Port: 80, ClientServices: clients}
}

func TestCheckConnectivity(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		kind  kind
		res   []*trafficv1.ConnectivityResource
		field string // "" for valid
	}{
		{"intra ok", kindIntracluster, []*trafficv1.ConnectivityResource{resource("a", &trafficv1.ClientService{ClientServiceName: "b", Protocol: "http"})}, ""},
		{"bad protocol", kindIntracluster, []*trafficv1.ConnectivityResource{resource("a"), resource("b", &trafficv1.ClientService{ClientServiceName: "c", Protocol: "SMTP"})},
			"x.connectivityResource[1].clientServices[0].protocol"},
		{"bad resource protocol", kindIntracluster, []*trafficv1.ConnectivityResource{{Id: "a", Protocol: "ftp"}}, "x.connectivityResource[0].protocol"},
		{"duplicate id", kindIntracluster, []*trafficv1.ConnectivityResource{resource("a"), resource("a")}, "x.connectivityResource[1].id"},
		{"duplicate client", kindIntracluster, []*trafficv1.ConnectivityResource{resource("a",
			&trafficv1.ClientService{ClientServiceName: "b"}, &trafficv1.ClientService{ClientServiceName: "b"})}, "x.connectivityResource[0].clientServices[1].clientServiceName"},
		{"intra client not a label", kindIntracluster, []*trafficv1.ConnectivityResource{resource("a", &trafficv1.ClientService{ClientServiceName: "b.example.com"})},
			"x.connectivityResource[0].clientServices[0].clientServiceName"},
		{"outbound ok", kindOutbound, []*trafficv1.ConnectivityResource{resource("a",
			&trafficv1.ClientService{ClientServiceName: "mongo.k8s.com", Type: "external"},
			&trafficv1.ClientService{ClientServiceName: "db.example.com", Protocol: "tcp", Port: 5432})}, ""},
		{"outbound not fqdn", kindOutbound, []*trafficv1.ConnectivityResource{resource("a", &trafficv1.ClientService{ClientServiceName: "not_an_fqdn"})},
			"x.connectivityResource[0].clientServices[0].clientServiceName"},
		{"outbound single label", kindOutbound, []*trafficv1.ConnectivityResource{resource("a", &trafficv1.ClientService{ClientServiceName: "localhost"})},
			"x.connectivityResource[0].clientServices[0].clientServiceName"},
		{"outbound ip", kindOutbound, []*trafficv1.ConnectivityResource{resource("a", &trafficv1.ClientService{ClientServiceName: "10.0.0.1"})},
			"x.connectivityResource[0].clientServices[0].clientServiceName"},
		{"outbound wildcard", kindOutbound, []*trafficv1.ConnectivityResource{resource("a", &trafficv1.ClientService{ClientServiceName: "*.example.com"})},
			"x.connectivityResource[0].clientServices[0].clientServiceName"},
		{"outbound trailing dot", kindOutbound, []*trafficv1.ConnectivityResource{resource("a", &trafficv1.ClientService{ClientServiceName: "example.com."})},
			"x.connectivityResource[0].clientServices[0].clientServiceName"},
		{"outbound tcp without port", kindOutbound, []*trafficv1.ConnectivityResource{resource("a", &trafficv1.ClientService{ClientServiceName: "db.example.com", Protocol: "TCP"})},
			"x.connectivityResource[0].clientServices[0].port"},
		{"outbound tcp inherited", kindOutbound, []*trafficv1.ConnectivityResource{{Id: "a", Protocol: "tcp", ClientServices: []*trafficv1.ClientService{{ClientServiceName: "db.example.com"}}}},
			"x.connectivityResource[0].clientServices[0].port"},
		{"outbound type", kindOutbound, []*trafficv1.ConnectivityResource{resource("a", &trafficv1.ClientService{ClientServiceName: "db.example.com", Type: "kubernetes"})},
			"x.connectivityResource[0].clientServices[0].type"},
		{"inbound ok", kindInbound, []*trafficv1.ConnectivityResource{{Id: "a", ExternalPrefix: "svc", Domain: "example.com"}}, ""},
		{"inbound no prefix", kindInbound, []*trafficv1.ConnectivityResource{{Id: "a", Domain: "example.com"}}, "x.connectivityResource[0].externalPrefix"},
		{"inbound no domain", kindInbound, []*trafficv1.ConnectivityResource{{Id: "a", ExternalPrefix: "svc"}}, "x.connectivityResource[0].domain"},
		{"cluster twice", kindIntracluster, []*trafficv1.ConnectivityResource{{Id: "a", Clusters: []*trafficv1.TrafficCluster{
			{ClusterProvider: "p", ClusterName: "c"}, {ClusterProvider: "p", ClusterName: "c"}}}}, "x.connectivityResource[0].clusters[1]"},
		{"empty label", kindIntracluster, []*trafficv1.ConnectivityResource{{Id: "a", ClusterLabels: []string{"ok", " "}}}, "x.connectivityResource[0].cluster-labels[1]"},
		{"client empty label", kindIntracluster, []*trafficv1.ConnectivityResource{resource("a", &trafficv1.ClientService{ClientServiceName: "b", ClusterLabels: []string{""}})},
			"x.connectivityResource[0].clientServices[0].cluster-labels[0]"},
	}
	for _, c := range cases {
		m := &trafficv1.ConnectivityIntent{ConnectivityResource: c.res}
		err := checkConnectivity("x.", c.kind, m)
		require.Equal(t, c.field, fieldOf(err), "%s: %v", c.name, err)
	}
	m := &trafficv1.ConnectivityIntent{ConnectivityResource: []*trafficv1.ConnectivityResource{{Id: "a", Protocol: "grpc",
		ClientServices: []*trafficv1.ClientService{{ClientServiceName: "b", Protocol: "Http2"}}}}}
	require.NoError(t, checkConnectivity("x.", kindIntracluster, m))
	require.Equal(t, "GRPC", m.GetConnectivityResource()[0].GetProtocol(), "stored upper-cased")
	require.Equal(t, "HTTP2", m.GetConnectivityResource()[0].GetClientServices()[0].GetProtocol())
}

func TestCheckIntercluster(t *testing.T) {
	t.Parallel()
	cases := []struct {
		m     *trafficv1.InterclusterIntent
		field string
	}{
		{&trafficv1.InterclusterIntent{Protocol: "https", ClientServices: []*trafficv1.ClientService{{ClientServiceName: "a"}}}, ""},
		{&trafficv1.InterclusterIntent{Protocol: "smtp"}, "x.protocol"},
		{&trafficv1.InterclusterIntent{ClientServices: []*trafficv1.ClientService{{ClientServiceName: "A_b"}}}, "x.clientServices[0].clientServiceName"},
		{&trafficv1.InterclusterIntent{ClusterLabels: []string{strings.Repeat("l", 64)}}, "x.cluster-labels[0]"},
	}
	for _, c := range cases {
		require.Equal(t, c.field, fieldOf(checkIntercluster("x.", c.m)), "%v", c.m)
	}
}

func TestCheckGroup(t *testing.T) {
	t.Parallel()
	g, err := checkGroup("g.", &trafficv1.TrafficIntentGroup{Name: "a", Metadata: nil})
	require.NoError(t, err, "the logical cloud may be set later (seed 004's body)")
	require.Equal(t, "", g.GetLogicalCloud())
	g, err = checkGroup("g.", &trafficv1.TrafficIntentGroup{Name: "a", LogicalCloud: "lc", Applied: true})
	require.NoError(t, err)
	require.Equal(t, "a", g.GetMetadata().GetName())
	require.False(t, g.GetApplied())
}

func TestCheckDNS(t *testing.T) {
	t.Parallel()
	base := func() map[string]string {
		return map[string]string{"rfc2136-host": "ns.example.com", "rfc2136-zone": "example.com."}
	}
	with := func(k, v string) map[string]string { m := base(); m[k] = v; return m }
	without := func(k string) map[string]string { m := base(); delete(m, k); return m }
	const secret = "s3cr3t-value"
	cases := []struct {
		name     string
		provider string
		params   map[string]string
		creds    map[string]string
		selector string
		field    string
	}{
		{"ok", "", base(), map[string]string{"rfc2136-tsig-secret": secret}, "a, b", ""},
		{"explicit rfc2136", "rfc2136", with("rfc2136-port", "53"), nil, "", ""},
		{"aws provider", "aws", base(), nil, "", "x.dnsProvider[0].provider"},
		{"aws parameter", "", with("aws-zone-type", "public"), nil, "", "x.dnsProvider[0].externalDnsParameters.aws-zone-type"},
		{"unknown parameter", "", with("interval", "1m"), nil, "", "x.dnsProvider[0].externalDnsParameters.interval"},
		{"secret as parameter", "", with("rfc2136-tsig-secret", secret), nil, "", "x.dnsProvider[0].externalDnsParameters.rfc2136-tsig-secret"},
		{"port", "", with("rfc2136-port", "70000"), nil, "", "x.dnsProvider[0].externalDnsParameters.rfc2136-port"},
		{"host", "", with("rfc2136-host", "not a host"), nil, "", "x.dnsProvider[0].externalDnsParameters.rfc2136-host"},
		{"host ip", "", with("rfc2136-host", "192.0.2.1"), nil, "", ""},
		// Refused before anything is stored: no run ever dials them.
		{"metadata address", "", with("rfc2136-host", "169.254.169.254"), nil, "", "x.dnsProvider[0].externalDnsParameters.rfc2136-host"},
		{"metadata name", "", with("rfc2136-host", "metadata.google.internal"), nil, "", "x.dnsProvider[0].externalDnsParameters.rfc2136-host"},
		{"link-local v6", "", with("rfc2136-host", "fe80::1"), nil, "", "x.dnsProvider[0].externalDnsParameters.rfc2136-host"},
		{"numeric form", "", with("rfc2136-host", "2852039166"), nil, "", "x.dnsProvider[0].externalDnsParameters.rfc2136-host"},
		{"no host", "", without("rfc2136-host"), nil, "", "x.dnsProvider[0].externalDnsParameters.rfc2136-host"},
		{"no zone", "", without("rfc2136-zone"), nil, "", "x.dnsProvider[0].externalDnsParameters.rfc2136-zone"},
		{"alg", "", with("rfc2136-tsig-secret-alg", "md5"), nil, "", "x.dnsProvider[0].externalDnsParameters.rfc2136-tsig-secret-alg"},
		{"alg dot", "", with("rfc2136-tsig-secret-alg", "hmac-sha256."), nil, "", ""},
		{"policy", "", with("policy", "delete-all"), nil, "", "x.dnsProvider[0].externalDnsParameters.policy"},
		{"bool", "", with("rfc2136-insecure", "yes please"), nil, "", "x.dnsProvider[0].externalDnsParameters.rfc2136-insecure"},
		{"min ttl", "", with("rfc2136-min-ttl", "30s"), nil, "", ""},
		{"credential name", "", base(), map[string]string{"password": secret}, "", "x.dnsProvider[0].providerCredentials.password"},
		{"selector", "", base(), nil, "a,,b", "x.dnsProvider[0].cluster-selector"},
	}
	for _, c := range cases {
		m := &trafficv1.DnsProviderIntent{DnsProvider: []*trafficv1.DnsProvider{{Id: "a", Provider: c.provider,
			ExternalDnsParameters: c.params, ProviderCredentials: c.creds, ClusterSelector: c.selector}}}
		err := checkDNS("x.", m)
		require.Equal(t, c.field, fieldOf(err), "%s: %v", c.name, err)
		if err != nil {
			require.NotContains(t, err.Error(), secret, c.name)
		} else {
			require.Equal(t, "rfc2136", m.GetDnsProvider()[0].GetProvider(), "inferred")
		}
	}
	dup := &trafficv1.DnsProviderIntent{DnsProvider: []*trafficv1.DnsProvider{
		{Id: "a", ExternalDnsParameters: base()}, {Id: "a", ExternalDnsParameters: base()}}}
	require.Equal(t, "x.dnsProvider[1].id", fieldOf(checkDNS("x.", dup)))
}

// TestParametersHaveNoDots: the stored record keeps externalDnsParameters
// as a map, whose keys become field names; the store refuses dotted ones.
func TestParametersHaveNoDots(t *testing.T) {
	t.Parallel()
	for k := range rfc2136Params {
		require.NotContains(t, k, ".")
	}
}

// TestDNSParametersAgree: a DNS provider intent is refused at create for a
// parameter its external-dns run would refuse at apply, and only then.
func TestDNSParametersAgree(t *testing.T) {
	require.Equal(t, dns.Parameters(), slices.Sorted(maps.Keys(rfc2136Params)))
}
