package render_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/goldentest"
	"github.com/dcm-project/dcm/platform/kubetest/istiotest"
	"github.com/dcm-project/dcm/services/traffic/internal/render"
)

// input is a two-cluster logical cloud: c1 has both labels the DNS
// example's cluster-selector names, c2 one of them.
func input() render.Input {
	return render.Input{
		Project: "proj1", CompositeApp: "app1", Version: "v1", Group: "john",
		LogicalCloud: "lc1", Namespace: "lc1-ns", IstioNamespace: "lc1-istio-system", Revision: "lc1",
		Clusters: []render.Target{
			{Provider: "p1", Cluster: "c1", Labels: []string{"label1", "label2"}, Address: "192.0.2.10"},
			{Provider: "p1", Cluster: "c2", Labels: []string{"label1"}, Address: "192.0.2.20"},
		},
	}
}

// seed reads one of the seed's example bodies (testdata/seed, made valid
// JSON) into msg as the REST edge does: a connectivityResource of one-key
// objects ({"microservice01": {...}}) becomes the flat form with the key
// as id, then protojson decodes it, refusing unknown fields.
func seed(t *testing.T, file string, msg proto.Message) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "seed", file))
	require.NoError(t, err)
	var body map[string]any
	require.NoError(t, json.Unmarshal(b, &body))
	if rs, ok := body["connectivityResource"].([]any); ok {
		for i, r := range rs {
			one, ok := r.(map[string]any)
			require.True(t, ok)
			require.Len(t, one, 1, "connectivityResource[%d] is a one-key object", i)
			for id, v := range one {
				flat, ok := v.(map[string]any)
				require.True(t, ok)
				flat["id"] = id
				rs[i] = flat
			}
		}
	}
	b, err = json.Marshal(body)
	require.NoError(t, err)
	require.NoError(t, protojson.Unmarshal(b, msg), file)
}

func intercluster(t *testing.T) *trafficv1.InterclusterIntent {
	it := &trafficv1.InterclusterIntent{}
	seed(t, "intercluster.json", it)
	return it
}

// placedIntercluster is the seed's inter-cluster example after
// scheduling: sleep01 on c1 only, httpbin02 on c2, httpbin03 on both
// (label1), so that c2 reaches sleep01 through c1's east-west gateway.
func placedIntercluster(t *testing.T) *trafficv1.InterclusterIntent {
	it := intercluster(t)
	it.Name = "johndoe-placed"
	it.Clusters = []*trafficv1.TrafficCluster{{ClusterProvider: "p1", ClusterName: "c1"}}
	it.ClientServices[0].Clusters = []*trafficv1.TrafficCluster{{ClusterProvider: "p1", ClusterName: "c2"}}
	it.ClientServices[1].ClusterLabels = []string{"label1"}
	return it
}

func connectivity(t *testing.T, file string) *trafficv1.ConnectivityIntent {
	it := &trafficv1.ConnectivityIntent{}
	seed(t, file, it)
	return it
}

func dnsIntent(t *testing.T) *trafficv1.DnsProviderIntent {
	it := &trafficv1.DnsProviderIntent{}
	seed(t, "dnsproviders.json", it)
	return it
}

// wholeGroup has every example of the seed in one group.
func wholeGroup(t *testing.T) render.Input {
	in := input()
	in.Intercluster = []*trafficv1.InterclusterIntent{intercluster(t), placedIntercluster(t)}
	in.Intracluster = []*trafficv1.ConnectivityIntent{connectivity(t, "intracluster.json")}
	in.Outbound = []*trafficv1.ConnectivityIntent{connectivity(t, "outbound.json")}
	in.Inbound = []*trafficv1.ConnectivityIntent{connectivity(t, "inbound.json")}
	in.DNS = []*trafficv1.DnsProviderIntent{dnsIntent(t)}
	return in
}

// variants are what the seed's examples do not show: the egress gateway
// for plain HTTP, TLS passed through, TCP (always mutual TLS to the
// gateway) and TLS with mutual TLS; an inter-cluster TCP target through
// the egress gateway; headless targets; IPv6 and host name addresses.
func variants(t *testing.T) render.Input {
	in := input()
	in.Clusters[0].Address = "2001:db8::10"
	in.Clusters[1].Address = "gw-c2.example.net"
	ext := func(name, proto string, port int32) *trafficv1.ClientService {
		return &trafficv1.ClientService{ClientServiceName: name, Protocol: proto, Port: port}
	}
	in.Outbound = []*trafficv1.ConnectivityIntent{{Name: "out", ConnectivityResource: []*trafficv1.ConnectivityResource{
		{Id: "plain", Name: "web", Port: 8080, Egressgateway: true, ClientServices: []*trafficv1.ClientService{
			ext("a.example.com", "http", 0), ext("b.example.com", "HTTPS", 0), ext("db.example.com", "TCP", 5432),
		}},
		{Id: "mutual", Name: "api", Port: 8080, MutualTls: true, ClientServices: []*trafficv1.ClientService{
			{ClientServiceName: "d.example.com", Protocol: "TLS", Egressgateway: true}, ext("e.example.com", "GRPC", 9090),
		}},
	}}}
	in.Intercluster = []*trafficv1.InterclusterIntent{{
		Name: "db", InboundServiceName: "postgres", Protocol: "TCP", Port: 5432, Headless: true,
		Clusters: []*trafficv1.TrafficCluster{{ClusterProvider: "p1", ClusterName: "c2"}},
		ClientServices: []*trafficv1.ClientService{
			{ClientServiceName: "api", Egressgateway: true, Serviceaccounts: []string{"api-reader", "api-writer"}},
			{ClientServiceName: "web", Clusters: []*trafficv1.TrafficCluster{{ClusterProvider: "p1", ClusterName: "c2"}}},
		},
	}}
	in.Intracluster = []*trafficv1.ConnectivityIntent{{Name: "cache", ConnectivityResource: []*trafficv1.ConnectivityResource{
		{Id: "redis", Name: "redis", Port: 6379, Protocol: "TCP", Headless: true, Loadbalancing: true,
			ClusterLabels: []string{"label2"}, ClientServices: []*trafficv1.ClientService{{ClientServiceName: "api"}}},
	}}}
	return in
}

// lines are what a golden file holds: each cluster's manifests after a
// "# provider/cluster" line, then the DNS runs as JSON.
func lines(t *testing.T, out []render.ClusterManifests, runs []render.DNSRun) []string {
	t.Helper()
	var ls []string
	for _, c := range out {
		ls = append(ls, "# "+c.Provider+"/"+c.Cluster)
		ls = append(ls, c.Manifests...)
	}
	for _, r := range runs {
		b, err := json.Marshal(r)
		require.NoError(t, err)
		ls = append(ls, "# dns run "+string(b))
	}
	return ls
}

// istioObjects are the manifests Istio validates: those of Istio's API
// groups (not the DNSEndpoints nor the DNS reader's ServiceAccount and RBAC).
func istioObjects(t *testing.T, out []render.ClusterManifests) []string {
	t.Helper()
	var ms []string
	for _, c := range out {
		for _, m := range c.Manifests {
			var o struct{ APIVersion string }
			require.NoError(t, json.Unmarshal([]byte(m), &o))
			if strings.Contains(o.APIVersion, ".istio.io/") {
				ms = append(ms, m)
			}
		}
	}
	return ms
}

func TestRenderGolden(t *testing.T) {
	cases := []struct {
		name string
		in   func(*testing.T) render.Input
	}{
		{"intercluster", func(t *testing.T) render.Input {
			in := input()
			in.Intercluster = []*trafficv1.InterclusterIntent{intercluster(t)}
			return in
		}},
		{"intercluster-placed", func(t *testing.T) render.Input {
			in := input()
			in.Intercluster = []*trafficv1.InterclusterIntent{placedIntercluster(t)}
			return in
		}},
		{"intracluster", func(t *testing.T) render.Input {
			in := input()
			in.Intracluster = []*trafficv1.ConnectivityIntent{connectivity(t, "intracluster.json")}
			return in
		}},
		{"outbound", func(t *testing.T) render.Input {
			in := input()
			in.Outbound = []*trafficv1.ConnectivityIntent{connectivity(t, "outbound.json")}
			return in
		}},
		{"inbound", func(t *testing.T) render.Input {
			in := input()
			in.Inbound = []*trafficv1.ConnectivityIntent{connectivity(t, "inbound.json")}
			return in
		}},
		{"dnsproviders", func(t *testing.T) render.Input {
			in := input()
			in.Inbound = []*trafficv1.ConnectivityIntent{connectivity(t, "inbound.json")}
			in.DNS = []*trafficv1.DnsProviderIntent{dnsIntent(t)}
			return in
		}},
		{"group", wholeGroup},
		{"variants", variants},
	}
	var all []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, runs, err := render.Render(tc.in(t))
			require.NoError(t, err)
			goldentest.Manifests(t, tc.name, lines(t, out, runs))
			// The same input again: byte for byte the same.
			again, runs2, err := render.Render(tc.in(t))
			require.NoError(t, err)
			require.Equal(t, out, again)
			require.Equal(t, runs, runs2)
			checkObjects(t, out)
			all = append(all, istioObjects(t, out)...)
		})
	}
	// Istio's own validation of every object rendered above, in one run
	// of istio-validate.
	istiotest.Validate(t, all)
}

// checkObjects asserts what holds for every rendered object: names and
// label values are DNS labels, every object carries the logical cloud's
// and the group's labels, no two objects of a cluster share kind and
// name, and the deny-all policy is on every cluster.
func checkObjects(t *testing.T, out []render.ClusterManifests) {
	t.Helper()
	for _, c := range out {
		seen := map[string]bool{}
		for _, m := range c.Manifests {
			var o struct {
				Kind     string
				Metadata struct {
					Name, Namespace string
					Labels          map[string]string
				}
			}
			require.NoError(t, json.Unmarshal([]byte(m), &o))
			require.LessOrEqual(t, len(o.Metadata.Name), 63, o.Metadata.Name)
			require.Equal(t, "lc1-ns", o.Metadata.Namespace)
			require.False(t, seen[o.Kind+"/"+o.Metadata.Name], "%s %s twice on %s", o.Kind, o.Metadata.Name, c.Cluster)
			seen[o.Kind+"/"+o.Metadata.Name] = true
			require.Equal(t, "proj1", o.Metadata.Labels["dcm.io/project"])
			require.Equal(t, "lc1", o.Metadata.Labels["dcm.io/logical-cloud"])
			require.Equal(t, "john", o.Metadata.Labels[render.GroupLabel])
			require.NotEmpty(t, o.Metadata.Labels[render.KindLabel])
			for k, v := range o.Metadata.Labels {
				require.LessOrEqual(t, len(v), 63, k)
			}
			require.NotContains(t, m, "c2VjcmV0LW5vdC1pbi1tYW5pZmVzdHM=", "a DNS credential in a manifest")
		}
		require.True(t, seen["AuthorizationPolicy/john-deny-all"], "deny-all on %s", c.Cluster)
		// deny-all comes after every ALLOW policy.
		last := slices.IndexFunc(c.Manifests, func(m string) bool { return strings.Contains(m, `"name":"john-deny-all"`) })
		for i, m := range c.Manifests {
			if strings.Contains(m, `"action":"ALLOW"`) && i != last {
				require.Less(t, i, last, "an ALLOW policy after deny-all on %s", c.Cluster)
			}
		}
	}
}

// TestOneDestinationRulePerHost: two intents asking for one host's
// DestinationRule share one, the strictest asking winning, named after
// the first (intracluster before external inbound).
func TestOneDestinationRulePerHost(t *testing.T) {
	in := input()
	intra := connectivity(t, "intracluster.json")
	intra.Name = "plain"
	intra.ConnectivityResource[0].MutualTls = false
	intra.ConnectivityResource[0].Loadbalancing = true
	inbound := connectivity(t, "inbound.json")
	inbound.Name = "public"
	inbound.ConnectivityResource[0].MutualTls = true
	in.Intracluster = []*trafficv1.ConnectivityIntent{intra}
	in.Inbound = []*trafficv1.ConnectivityIntent{inbound}
	out, _, err := render.Render(in)
	require.NoError(t, err)
	for _, c := range out {
		var rules []map[string]any
		for _, m := range c.Manifests {
			var o map[string]any
			require.NoError(t, json.Unmarshal([]byte(m), &o))
			spec, _ := o["spec"].(map[string]any)
			if o["kind"] == "DestinationRule" && spec["host"] == "httpbin01.lc1-ns.svc.cluster.local" {
				rules = append(rules, o)
			}
		}
		require.Len(t, rules, 1, "on %s", c.Cluster)
		md := rules[0]["metadata"].(map[string]any)
		require.Equal(t, "john-plain-dr-httpbin01", md["name"])
		require.Equal(t, "intracluster", md["labels"].(map[string]any)[render.KindLabel])
		policy := rules[0]["spec"].(map[string]any)["trafficPolicy"].(map[string]any)
		require.Equal(t, map[string]any{"mode": "ISTIO_MUTUAL"}, policy["tls"], "the inbound intent's mutual TLS wins")
		require.Equal(t, "LEAST_REQUEST", policy["loadBalancer"].(map[string]any)["simple"])
	}
	istiotest.Validate(t, istioObjects(t, out))
}

// TestDNSRecordType: an IPv6 loadbalancer-ip is published as AAAA, and
// the run names the publishing cluster and selects its DNSEndpoint.
func TestDNSRecordType(t *testing.T) {
	in := wholeGroup(t)
	in.Clusters[0].Address = "2001:db8::10"
	out, runs, err := render.Render(in)
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "service1.example.com", runs[0].ExternalName)
	require.Equal(t, "rfc2136", runs[0].Provider)
	require.Equal(t, []render.Target{in.Clusters[0]}, runs[0].Clusters)
	found := 0
	for _, c := range out {
		for _, m := range c.Manifests {
			var o struct {
				Kind     string
				Metadata struct{ Labels map[string]string }
				Spec     struct {
					Endpoints []struct {
						DNSName    string
						RecordType string
						Targets    []string
					}
				}
			}
			require.NoError(t, json.Unmarshal([]byte(m), &o))
			if o.Kind != "DNSEndpoint" {
				continue
			}
			found++
			require.Equal(t, "c1", c.Cluster)
			for k, v := range runs[0].Selector {
				require.Equal(t, v, o.Metadata.Labels[k], k)
			}
			require.Len(t, o.Spec.Endpoints, 1)
			require.Equal(t, "AAAA", o.Spec.Endpoints[0].RecordType)
			require.Equal(t, []string{"2001:db8::10"}, o.Spec.Endpoints[0].Targets)
		}
	}
	require.Equal(t, 1, found)
}
