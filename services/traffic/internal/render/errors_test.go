package render_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest/istiotest"
	"github.com/dcm-project/dcm/services/traffic/internal/render"
)

// TestRenderRefuses: bad intents are refused with the intent and field
// named (InvalidArgument) or the cluster named (FailedPrecondition), and
// nothing is rendered.
func TestRenderRefuses(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*render.Input)
		code  codes.Code
		field string
		msg   string
	}{
		{"unknown cluster", func(in *render.Input) {
			in.Intercluster[0].Clusters = []*trafficv1.TrafficCluster{{ClusterProvider: "p1", ClusterName: "c9"}}
		}, codes.InvalidArgument, "interclusterservice/johndoe: clusters[0]", "p1/c9"},
		{"unknown client cluster", func(in *render.Input) {
			in.Intercluster[0].ClientServices[1].Clusters = []*trafficv1.TrafficCluster{{ClusterProvider: "p9", ClusterName: "c1"}}
		}, codes.InvalidArgument, "interclusterservice/johndoe: clientServices[1].clusters[0]", "p9/c1"},
		{"no cluster with the labels", func(in *render.Input) {
			in.Intracluster[0].ConnectivityResource[0].ClusterLabels = []string{"label1", "gpu"}
		}, codes.InvalidArgument, "intraclusterservice/microservice01: connectivityResource[0].cluster-labels", "gpu"},
		{"DNS id of no inbound resource", func(in *render.Input) {
			in.DNS[0].Name = "publish"
			in.DNS[0].DnsProvider[0].Id = "microservice09"
		}, codes.InvalidArgument, "dnsproviders/publish: dnsProvider[0].id", "microservice09"},
		{"DNS selector matching none", func(in *render.Input) {
			in.DNS[0].DnsProvider[0].ClusterSelector = "label3"
		}, codes.InvalidArgument, "dnsproviders/microservice01: dnsProvider[0].cluster-selector", "label3"},
		{"DNS provider unknown", func(in *render.Input) {
			in.DNS[0].DnsProvider[0].Provider = "aws"
		}, codes.InvalidArgument, "dnsproviders/microservice01: dnsProvider[0].provider", "aws"},
		{"target cluster without address", func(in *render.Input) {
			in.Clusters[0].Address = ""
		}, codes.FailedPrecondition, "", "p1/c1"},
		{"publishing cluster with a host name", func(in *render.Input) {
			in.Intercluster = in.Intercluster[:1] // no east-west need for c1's address
			in.Clusters[0].Address = "gw.example.com"
		}, codes.FailedPrecondition, "", "p1/c1"},
		{"address with an IPv6 zone", func(in *render.Input) {
			// The issue 29 attack: string.ip accepts a zone of any text.
			in.Clusters[0].Address = "fe80::1%x\n  externalIPs: [203.0.113.7]"
		}, codes.InvalidArgument, "loadbalancer-ip", "p1/c1"},
		{"address with a plain zone", func(in *render.Input) {
			in.Clusters[1].Address = "fe80::1%eth0"
		}, codes.InvalidArgument, "loadbalancer-ip", "zone"},
		{"address neither IP nor name", func(in *render.Input) {
			in.Clusters[1].Address = "10.0.0.1\"\nbad: x"
		}, codes.InvalidArgument, "loadbalancer-ip", "p1/c2"},
		{"protocol", func(in *render.Input) {
			in.Outbound[0].ConnectivityResource[1].ClientServices[0].Protocol = "SMTP"
		}, codes.InvalidArgument, "externaloutboundaccess/microservice01: connectivityResource[1].clientServices[0].protocol", "SMTP"},
		{"TCP external service without port", func(in *render.Input) {
			in.Outbound[0].ConnectivityResource[1].ClientServices[0].Protocol = "TCP"
		}, codes.InvalidArgument, "externaloutboundaccess/microservice01: connectivityResource[1].clientServices[0].port", "TCP"},
		{"external host not a DNS name", func(in *render.Input) {
			in.Outbound[0].ConnectivityResource[0].ClientServices[0].ClientServiceName = "*.k8s.com"
		}, codes.InvalidArgument, "externaloutboundaccess/microservice01: connectivityResource[0].clientServices[0].clientServiceName", "*.k8s.com"},
		{"one host, two ports through the egress gateway", func(in *render.Input) {
			in.Outbound[0].ConnectivityResource[1].ClientServices[0].ClientServiceName = "mongo.k8s.com"
			in.Outbound[0].ConnectivityResource[1].ClientServices[0].Port = 8080
		}, codes.InvalidArgument, "externaloutboundaccess/microservice01: connectivityResource[1].clientServices[0].clientServiceName", "on port 80 (HTTP)"},
		{"client protocol other than the target's", func(in *render.Input) {
			in.Intracluster[0].ConnectivityResource[0].ClientServices[1].Protocol = "tcp"
		}, codes.InvalidArgument, "intraclusterservice/microservice01: connectivityResource[0].clientServices[1].protocol", "TCP"},
		{"inbound TCP", func(in *render.Input) {
			in.Inbound[0].ConnectivityResource[1].Protocol = "TCP"
		}, codes.InvalidArgument, "externalinboundaccess/microservice01: connectivityResource[1].protocol", "TCP"},
		{"inbound without host", func(in *render.Input) {
			in.Inbound[0].ConnectivityResource[1].ExternalPrefix = ""
		}, codes.InvalidArgument, "externalinboundaccess/microservice01: connectivityResource[1].externalPrefix", "microservice02"},
		{"inbound prefix without domain", func(in *render.Input) {
			in.Inbound[0].ConnectivityResource[1].Domain = ""
		}, codes.InvalidArgument, "externalinboundaccess/microservice01: connectivityResource[1].domain", "shop"},
		{"duplicate resource id", func(in *render.Input) {
			in.Inbound[0].ConnectivityResource[1].Id = "microservice01"
		}, codes.InvalidArgument, "externalinboundaccess/microservice01: connectivityResource[1].id", "microservice01"},
		{"two intents' names run together", func(in *render.Input) {
			// john-a + "allow-microservice01" and john-a-allow +
			// "microservice01"... both make john-a-allow-...: here an
			// intracluster intent "johndoe" whose resource id makes the
			// inter-cluster intent's policy name.
			in.Intracluster[0].Name = "johndoe"
			in.Intracluster[0].ConnectivityResource[0].Id = "sleep01"
		}, codes.InvalidArgument, "intraclusterservice/johndoe: name", "johndoe"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := wholeGroup(t)
			tc.edit(&in)
			out, runs, err := render.Render(in)
			require.Error(t, err)
			require.Nil(t, out)
			require.Nil(t, runs)
			require.Equal(t, tc.code, errs.Code(err), err.Error())
			if tc.field != "" {
				require.Equal(t, tc.field, errs.FieldOf(errs.ToStatus(err)), err.Error())
			}
			require.Contains(t, err.Error(), tc.msg)
		})
	}
}

// TestRenderNames: names and label values longer than 63 characters are
// cut with a hash, stay distinct, and the inputs stay byte for byte.
func TestRenderNames(t *testing.T) {
	long := strings.Repeat("a", 60)
	require.Equal(t, "g-i-what", render.Name("g", "i", "what"))
	n1, n2 := render.Name(long, long, "x"), render.Name(long, long, "y")
	require.Len(t, n1, 63)
	require.NotEqual(t, n1, n2)
	require.Equal(t, n1, render.Name(long, long, "x"))
	require.Equal(t, "p1-c1", kube.MeshClusterID("p1", "c1"))
	require.Len(t, kube.MeshClusterID(long, long), 63)

	in := wholeGroup(t)
	in.Group = long[:50]
	out, _, err := render.Render(in)
	require.NoError(t, err)
	for _, c := range out {
		for _, m := range c.Manifests {
			require.NotContains(t, m, `"traffic.dcm.io/group":"`+long[:50]+`-`)
		}
	}
	// Istio accepts the cut names as well.
	istiotest.Validate(t, istioObjects(t, out))
}

// TestIstioValidationRefuses: the validation the golden tests rely on
// does refuse what Istio refuses (so their passing means something).
func TestIstioValidationRefuses(t *testing.T) {
	findings := istiotest.ValidateFindings(t, []string{
		`{"apiVersion":"networking.istio.io/v1","kind":"DestinationRule","metadata":{"name":"d","namespace":"ns"},"spec":{"host":"x","trafficPolicy":{"tls":{"mode":"ISTIO_MUTUAL"}},"subsets":[{"name":"a"},{"name":"a"}]}}`,
		`{"apiVersion":"networking.istio.io/v1","kind":"ServiceEntry","metadata":{"name":"s","namespace":"ns"},"spec":{"hosts":["a.b"],"bogus":true}}`,
		`{"apiVersion":"security.istio.io/v1","kind":"AuthorizationPolicy","metadata":{"name":"a","namespace":"ns"},"spec":{}}`,
		`{"apiVersion":"externaldns.k8s.io/v1alpha1","kind":"DNSEndpoint","metadata":{"name":"d","namespace":"ns"},"spec":{}}`,
		`{"apiVersion":"networking.istio.io/v1","kind":"VirtualService","metadata":{"name":"v","namespace":"ns"},"spec":{"hosts":["a.com"],"http":[{"route":[{"destination":{"host":"a.com"}}]},{"match":[{"port":80}],"route":[{"destination":{"host":"a.com"}}]}]}}`,
	})
	require.Len(t, findings, 5)
	require.NotEmpty(t, findings[0].Errors, "duplicate subset names")
	require.NotEmpty(t, findings[1].Errors, "unknown field")
	require.Empty(t, findings[2].Errors, "deny-all is valid")
	require.NotEmpty(t, findings[3].Errors, "not an Istio kind")
	require.Empty(t, findings[4].Errors)
	require.NotEmpty(t, findings[4].Warnings, "a route after a catch-all one is a warning")
}
