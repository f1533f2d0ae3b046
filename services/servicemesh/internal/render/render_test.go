package render_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/goldentest"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/services/servicemesh/internal/render"
)

// golden compares manifests, one a line, with testdata/name.golden.
func golden(t *testing.T, name string, manifests []string) {
	t.Helper()
	goldentest.Manifests(t, name, manifests)
}

// fakeCA is stand-in PEM text: the renderer does not parse it, and fixed
// text keeps the golden files byte for byte (real certificates are in the
// service's tests).
func fakeCA(cluster string) render.CA {
	return render.CA{
		CACert:    "-----BEGIN CERTIFICATE-----\nca-" + cluster + "\n-----END CERTIFICATE-----\n",
		CAKey:     "-----BEGIN PRIVATE KEY-----\nkey-" + cluster + "\n-----END PRIVATE KEY-----\n",
		CertChain: "-----BEGIN CERTIFICATE-----\nchain-" + cluster + "\n-----END CERTIFICATE-----\n",
		RootCert:  "-----BEGIN CERTIFICATE-----\nroot\n-----END CERTIFICATE-----\n",
	}
}

func input(project, lc, ns string) render.Input {
	return render.Input{
		Project: project, LogicalCloud: lc, IstioNamespace: ns, WorkloadNamespace: lc + "-ns", Revision: lc,
		TrustDomain: lc + "." + project + ".dcm.local", Hub: "docker.io/istio", Tag: "1.31.0",
		Clusters: []render.Cluster{
			{Provider: "edge", Cluster: "c1", LoadBalancerIP: "192.0.2.10", CA: fakeCA("c1")},
			{Provider: "edge", Cluster: "c2", LoadBalancerIP: "192.0.2.20", CA: fakeCA("c2")},
		},
	}
}

type obj struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	raw map[string]any
}

func parse(t *testing.T, j string) obj {
	t.Helper()
	var o obj
	require.NoError(t, json.Unmarshal([]byte(j), &o))
	require.NoError(t, json.Unmarshal([]byte(j), &o.raw))
	require.NotEmpty(t, o.APIVersion, j[:min(200, len(j))])
	require.NotEmpty(t, o.Kind)
	require.NotEmpty(t, o.Metadata.Name)
	return o
}

var clusterScoped = map[string]bool{
	"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true, "CustomResourceDefinition": true,
}

func TestRenderTwoClusters(t *testing.T) {
	t.Parallel()
	out, err := render.Render(input("p1", "lc1", "lc1-istio-system"))
	require.NoError(t, err)
	require.Len(t, out, 2)
	for i, c := range out {
		id := "edge-" + c.Cluster
		require.Equal(t, []string{"c1", "c2"}[i], c.Cluster)
		var jsons []string
		kinds := map[string]int{}
		sensitive := 0
		for _, m := range c.Manifests {
			jsons = append(jsons, m.JSON)
			o := parse(t, m.JSON)
			kinds[o.Kind]++
			require.Equal(t, "p1", o.Metadata.Labels["dcm.io/project"], o.Kind+" "+o.Metadata.Name)
			require.Equal(t, "lc1", o.Metadata.Labels["dcm.io/logical-cloud"], o.Kind+" "+o.Metadata.Name)
			if clusterScoped[o.Kind] {
				require.Empty(t, o.Metadata.Namespace, o.Kind+" "+o.Metadata.Name)
				require.Contains(t, o.Metadata.Name, "lc1", "cluster-scoped %s %s carries the revision", o.Kind, o.Metadata.Name)
			} else if o.Metadata.Namespace != "lc1-istio-system" {
				// istiod's Role and RoleBinding in the workload namespace
				// (rbac.go), and its deny-all.
				require.Equal(t, "lc1-ns", o.Metadata.Namespace, o.Kind+" "+o.Metadata.Name)
				require.Contains(t, []string{"Role", "RoleBinding", "AuthorizationPolicy"}, o.Kind, o.Metadata.Name)
			}
			require.NotEqual(t, "istiod-default-validator", o.Metadata.Name)
			require.NotContains(t, m.JSON, "caBundle\":\"", "no caBundle is ever rendered")
			// The key is only in the sensitive cacerts Secret.
			keyB64 := base64.StdEncoding.EncodeToString([]byte(fakeCA(c.Cluster).CAKey))
			if m.Sensitive {
				sensitive++
				require.Equal(t, "Secret", o.Kind)
				require.Equal(t, "cacerts", o.Metadata.Name)
				require.Contains(t, m.JSON, keyB64)
			} else {
				require.NotContains(t, m.JSON, keyB64)
				require.NotContains(t, m.JSON, "PRIVATE KEY")
			}
			switch o.Kind {
			case "Namespace":
				require.Equal(t, "lc1-istio-system", o.Metadata.Name)
				require.Equal(t, id, o.Metadata.Labels["topology.istio.io/network"])
			case "ClusterRole":
				if strings.HasPrefix(o.Metadata.Name, render.RevisionClaimPrefix) {
					require.Equal(t, render.RevisionClaimPrefix+"lc1", o.Metadata.Name)
				}
			case "MutatingWebhookConfiguration":
				require.Contains(t, m.JSON, `"istio.io/rev","operator":"In","values":["lc1"]`)
			case "ValidatingWebhookConfiguration":
				require.Contains(t, m.JSON, `"failurePolicy":"Fail"`)
				require.NotContains(t, m.JSON, `"failurePolicy":"Ignore"`)
			case "ConfigMap":
				if o.Metadata.Name == "istio-lc1" {
					mesh := o.raw["data"].(map[string]any)["mesh"].(string)
					require.Contains(t, mesh, "trustDomain: lc1.p1.dcm.local")
					require.Contains(t, mesh, "dcm.io/logical-cloud: lc1")
					require.Contains(t, mesh, "dcm.io/project: p1")
					require.Contains(t, mesh, "meshId: p1-lc1")
					nets := o.raw["data"].(map[string]any)["meshNetworks"].(string)
					require.Contains(t, nets, "address: 192.0.2.10")
					require.Contains(t, nets, "address: 192.0.2.20")
					require.Contains(t, nets, "fromRegistry: edge-c2")
				}
			case "Deployment":
				if o.Metadata.Name == "istiod-lc1" {
					for _, want := range []string{`"name":"REVISION","value":"lc1"`, `"name":"ISTIO_MULTIROOT_MESH","value":"true"`,
						`"name":"CLUSTER_ID","value":"` + id + `"`, `"image":"docker.io/istio/pilot:1.31.0"`} {
						require.Contains(t, m.JSON, want)
					}
				}
			case "Service":
				if o.Metadata.Name == render.EastWestGateway {
					require.Contains(t, m.JSON, `"loadBalancerIP":"192.0.2.`)
					require.Contains(t, m.JSON, `"port":15443`)
					require.Equal(t, id, o.Metadata.Labels["topology.istio.io/network"])
				}
			case "AuthorizationPolicy":
				require.Equal(t, render.DenyAllPolicy, o.Metadata.Name)
				require.Equal(t, "lc1-ns", o.Metadata.Namespace, "the workloads' namespace, never the gateways'")
				require.Equal(t, "security.istio.io/v1", o.raw["apiVersion"])
				require.Equal(t, kube.DenyAllPolicySpec(), o.raw["spec"], "an ALLOW policy that matches nothing, proxyless servers included")
			case "Gateway":
				require.Equal(t, render.CrossNetworkGateway, o.Metadata.Name)
				require.Contains(t, m.JSON, `"selector":{"app":"istio-eastwestgateway","dcm.io/logical-cloud":"lc1","dcm.io/project":"p1","istio":"eastwestgateway"}`)
			}
		}
		require.Equal(t, 1, sensitive)
		for _, k := range []string{"Namespace", "Secret", "Deployment", "Service", "Gateway", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			require.NotZero(t, kinds[k], k)
		}
		require.Equal(t, 4, kinds["Deployment"], "istiod and the east-west, ingress and egress gateways")
		require.Equal(t, 1, kinds["AuthorizationPolicy"], "the workload namespace's deny-all")
		golden(t, "lc1-"+c.Cluster, jsons)
	}
	// The same input, the same bytes.
	again, err := render.Render(input("p1", "lc1", "lc1-istio-system"))
	require.NoError(t, err)
	require.Equal(t, out, again)
}

// Two logical clouds on one cluster: no two objects share a name where the
// cluster holds one of each (cluster-scoped) or in one namespace.
func TestTwoLogicalCloudsDoNotCollide(t *testing.T) {
	t.Parallel()
	names := map[string]string{}
	for _, lc := range []string{"lc1", "lc2"} {
		out, err := render.Render(input("p1", lc, lc+"-istio-system"))
		require.NoError(t, err)
		for _, m := range out[0].Manifests {
			o := parse(t, m.JSON)
			key := o.Kind + "/" + o.Metadata.Namespace + "/" + o.Metadata.Name
			prev, taken := names[key]
			require.False(t, taken, "%s rendered for %s and %s", key, prev, lc)
			names[key] = lc
		}
	}
	// The same logical cloud name in another project, in another namespace:
	// everything differs but the revision claim, which rsync's one-owner
	// rule then refuses.
	other := input("p2", "lc1", "other-istio")
	other.WorkloadNamespace = "other-ns" // a namespace has one owner
	out, err := render.Render(other)
	require.NoError(t, err)
	var shared []string
	for _, m := range out[0].Manifests {
		o := parse(t, m.JSON)
		if _, taken := names[o.Kind+"/"+o.Metadata.Namespace+"/"+o.Metadata.Name]; taken {
			shared = append(shared, o.Kind+"/"+o.Metadata.Name)
		}
	}
	require.Equal(t, []string{"ClusterRole/" + render.RevisionClaimPrefix + "lc1"}, shared)
}

func TestRenderRefusesLongRevision(t *testing.T) {
	t.Parallel()
	in := input("p1", strings.Repeat("a", render.MaxRevision+1), "ns")
	_, err := render.Render(in)
	require.ErrorContains(t, err, "revision")
}

func TestCRDs(t *testing.T) {
	t.Parallel()
	crds, err := render.CRDs()
	require.NoError(t, err)
	require.Len(t, crds, 16, "Istio's 15 and external-dns's DNSEndpoint")
	seen := map[string]bool{}
	for _, c := range crds {
		o := parse(t, c)
		require.Equal(t, "CustomResourceDefinition", o.Kind)
		require.Equal(t, "apiextensions.k8s.io/v1", o.APIVersion)
		require.Less(t, len(c), 1<<20, "fits rsync's per-manifest limit")
		seen[o.Metadata.Name] = true
	}
	for _, want := range []string{"gateways.networking.istio.io", "destinationrules.networking.istio.io", "peerauthentications.security.istio.io",
		"dnsendpoints.externaldns.k8s.io"} {
		require.True(t, seen[want], want)
	}
}
