package allinone_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/kubetest/bindtest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// trafficResources are the kinds a traffic intent group puts on a cluster.
var trafficResources = []schema.GroupVersionResource{
	{Group: "networking.istio.io", Version: "v1", Resource: "gateways"},
	{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices"},
	{Group: "networking.istio.io", Version: "v1", Resource: "destinationrules"},
	{Group: "networking.istio.io", Version: "v1", Resource: "serviceentries"},
	{Group: "security.istio.io", Version: "v1", Resource: "authorizationpolicies"},
	{Group: "security.istio.io", Version: "v1", Resource: "peerauthentications"},
	{Group: "externaldns.k8s.io", Version: "v1alpha1", Resource: "dnsendpoints"},
	{Version: "v1", Resource: "serviceaccounts"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
}

// trafficOn lists, with the cluster's admin access, the objects of a
// traffic intent group on a cluster as "<resource>/<kind label>/<name>".
func trafficOn(t testing.TB, c *kubetest.Cluster, group string) []string {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	var out []string
	for _, k := range trafficResources {
		list, err := dyn.Resource(k).List(context.Background(), metav1.ListOptions{LabelSelector: "traffic.dcm.io/group=" + group})
		require.NoError(t, err)
		for _, o := range list.Items {
			out = append(out, k.Resource+"/"+o.GetLabels()["traffic.dcm.io/kind"]+"/"+o.GetName())
		}
	}
	sort.Strings(out)
	return out
}

// withKind are the entries of trafficOn of one resource and kind label.
func withKind(objs []string, resource, kind string) []string {
	var out []string
	for _, o := range objs {
		if strings.HasPrefix(o, resource+"/"+kind+"/") {
			out = append(out, o)
		}
	}
	return out
}

// bookinfo is docs/walkthrough.md's traffic example: the seed's intents for Istio's
// bookinfo application on a two-cluster logical cloud.
func bookinfoIntents(dns *bindtest.Server) map[string]string {
	return map[string]string{
		// reviews takes calls from productpage on its own cluster.
		"traffic-intent-groups/bookinfo/intraclusterservice": `{"description": "productpage calls reviews",
			"connectivityResource": [{"reviews": {"name": "reviews", "application": "bookinfo", "mutualTLS": "true", "port": "9080",
				"serviceMesh": "istio", "clientServices": [{"clientServiceName": "productpage", "protocol": "HTTP", "headless": "false", "type": "intracluster"}]}}]}`,
		// ratings runs on cluster 2; reviews on cluster 1 reaches it.
		"traffic-intent-sets/bookinfo/interclusterservice": `{"name": "ratings", "description": "reviews calls ratings across clusters",
			"inboundservicename": "ratings", "protocol": "HTTP", "headless": "false", "mutualTLS": "true", "port": "9080", "serviceMesh": "istio",
			"clusters": [{"cluster-provider": "edge", "cluster-name": "CLUSTER2"}],
			"clientServices": [{"clientServiceName": "reviews", "headless": "false", "egressgateway": "false",
				"clusters": [{"cluster-provider": "edge", "cluster-name": "CLUSTER1"}]}]}`,
		// details calls an external API through the egress gateway.
		"intent/bookinfo/connectivity/external/outbound": `{"description": "details reads books",
			"connectivityResource": [{"details": {"name": "details", "application": "bookinfo", "egressgateway": "true", "mutualTLS": "true", "port": "9080",
				"serviceMesh": "istio", "clientServices": [{"clientServiceName": "www.googleapis.com", "protocol": "HTTPS", "type": "external"}]}}]}`,
		// productpage is published at bookinfo.example.com.
		"intent/bookinfo/connectivity/external/inbound": `{"description": "the shop's front page",
			"connectivityResource": [{"productpage": {"name": "productpage", "application": "bookinfo", "externalPrefix": "bookinfo", "domain": "example.com",
				"port": "9080", "protocol": "HTTP", "serviceMesh": "istio"}}]}`,
		"intent/bookinfo/connectivity/dnsproviders": fmt.Sprintf(`{"description": "publish the front page",
			"dnsProvider": [{"id": "productpage", "externalName": "bookinfo.example.com", "cluster-selector": "harness",
				"externalDnsParameters": {"rfc2136-host": "127.0.0.1", "rfc2136-port": "%d", "rfc2136-zone": "example.com",
					"rfc2136-tsig-secret-alg": "hmac-sha256"},
				"providerCredentials": {"rfc2136-tsig-keyname": %q, "rfc2136-tsig-secret": %q}}]}`, dns.Port, dns.KeyName, dns.Secret),
	}
}

// TestTrafficIntentsOnClusters: the bookinfo example on two real clusters
// of a mesh logical cloud. Apply puts every intent's Istio objects on the
// clusters the intents name (the API server with Istio's CRDs admits them
// all), the DNS provider intent makes a real BIND server answer the name
// with both clusters' addresses; the logical cloud cannot be terminated
// under the group; /update after an intent is removed removes its objects;
// terminate leaves nothing on the clusters and nothing in the zone.
func TestTrafficIntentsOnClusters(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	dns := bindtest.Start(t)
	stack := stacktest.StartWith(t, stacktest.Options{Args: []string{"-dns-interval", "500ms"}})
	r := apitest.NewREST(t, stack)
	apitest.RegisterHarness(t, r, h)
	c1, c2 := h.Clusters[0], h.Clusters[1]
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"pt"}}`)
	lc := "/v2/projects/pt/logical-clouds/shop"
	r.Want(201, "POST", "/v2/projects/pt/logical-clouds", apitest.MeshBody("shop"))
	for i, c := range []*kubetest.Cluster{c1, c2} {
		r.Want(201, "POST", lc+"/cluster-references",
			fmt.Sprintf(`{"cluster-provider":"edge","cluster-name":%q,"loadbalancer-ip":"192.0.2.%d"}`, c.Name, 11+i))
	}
	r.Want(202, "POST", lc+"/apply", "")
	r.Settle(lc, "Instantiated")

	base := "/v2/project/pt/rb/bookinfo/v1/"
	group := base + "traffic-intent-groups/bookinfo"
	r.Want(201, "POST", base+"traffic-intent-groups", `{"name": "bookinfo", "description": "bookinfo traffic", "logical-cloud": "shop"}`)
	// The operator lets the project use the test's BIND (on loopback: a
	// literal address listed is admitted).
	r.Want(200, "PUT", "/v2/projects/pt/dns-allow-list", fmt.Sprintf(`{"servers":["127.0.0.1:%d"],"zones":["example.com"]}`, dns.Port))
	for path, body := range bookinfoIntents(dns) {
		body = strings.NewReplacer("CLUSTER1", c1.Name, "CLUSTER2", c2.Name).Replace(body)
		r.Want(201, "POST", base+path, body)
	}
	r.Want(202, "POST", group+"/apply", "")
	st := r.SettleTraffic(group, "Applied")
	require.Len(t, st.Clusters, 2)

	on1, on2 := trafficOn(t, c1, "bookinfo"), trafficOn(t, c2, "bookinfo")
	for _, objs := range [][]string{on1, on2} {
		require.NotEmpty(t, withKind(objs, "authorizationpolicies", "group"), "deny-all: %v", objs)
		require.NotEmpty(t, withKind(objs, "peerauthentications", "group"), "STRICT mutual TLS: %v", objs)
		require.NotEmpty(t, withKind(objs, "authorizationpolicies", "intracluster"), "reviews allows productpage: %v", objs)
		require.NotEmpty(t, withKind(objs, "serviceentries", "external-outbound"), "www.googleapis.com: %v", objs)
		require.NotEmpty(t, withKind(objs, "gateways", "external-outbound"), "the egress gateway: %v", objs)
		require.NotEmpty(t, withKind(objs, "gateways", "external-inbound"), "bookinfo.example.com: %v", objs)
		require.NotEmpty(t, withKind(objs, "dnsendpoints", "dns"), "the DNS record: %v", objs)
	}
	require.NotEmpty(t, withKind(on1, "serviceentries", "intercluster"), "reviews on %s reaches ratings on %s: %v", c1.Name, c2.Name, on1)
	require.Empty(t, withKind(on2, "serviceentries", "intercluster"), "ratings runs on %s: no ServiceEntry there: %v", c2.Name, on2)
	require.NotEmpty(t, withKind(on2, "authorizationpolicies", "intercluster"), "ratings allows reviews: %v", on2)

	// The DNS round trip: a real DNS query answers both clusters.
	apitest.Eventually(t, "BIND answers bookinfo.example.com with both clusters", func() bool {
		got := dns.Lookup(t, "bookinfo.example.com", "A")
		slices.Sort(got)
		return slices.Equal(got, []string{"192.0.2.11", "192.0.2.12"})
	})
	raw := r.Want(200, "GET", group+"/status", "")
	require.NotContains(t, raw, dns.Secret, "the TSIG secret is never shown")
	require.NotContains(t, r.Want(200, "GET", base+"intent/bookinfo/connectivity/dnsproviders/productpage", ""), dns.Secret)

	// The logical cloud stays while the group is applied.
	held := r.Want(409, "POST", lc+"/terminate", "")
	require.Equal(t, "REFERENCED", decodeMap(t, held)["reason"], held)
	// An applied group is not deleted.
	r.Want(409, "DELETE", group, "")

	// Remove the intra-cluster intent, update: its objects go, the rest stay.
	r.Want(204, "DELETE", base+"traffic-intent-groups/bookinfo/intraclusterservice/reviews", "")
	r.Want(202, "POST", group+"/update", "")
	r.SettleTraffic(group, "Applied")
	for _, c := range []*kubetest.Cluster{c1, c2} {
		objs := trafficOn(t, c, "bookinfo")
		require.Empty(t, withKind(objs, "authorizationpolicies", "intracluster"), "%s: %v", c.Name, objs)
		require.Empty(t, withKind(objs, "destinationrules", "intracluster"), "%s: %v", c.Name, objs)
		require.NotEmpty(t, withKind(objs, "gateways", "external-inbound"), "%s: %v", c.Name, objs)
	}

	// Terminate: nothing left on the clusters, nothing in the zone.
	r.Want(202, "POST", group+"/terminate", "")
	r.SettleTraffic(group, "Terminated")
	require.Empty(t, trafficOn(t, c1, "bookinfo"))
	require.Empty(t, trafficOn(t, c2, "bookinfo"))
	apitest.Eventually(t, "BIND no longer answers bookinfo.example.com", func() bool {
		return len(dns.Lookup(t, "bookinfo.example.com", "A")) == 0
	})
	r.Want(204, "DELETE", group, "")
	r.Want(202, "POST", lc+"/terminate", "")
	r.Settle(lc, "Terminated")
	// Deleting the logical cloud takes core's record of the group with it.
	r.Want(204, "DELETE", lc, "")
}
