package render_test

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/services/servicemesh/internal/render"
)

// grant is one allowed (apiGroup, resource, verb, resourceNames) of a
// cluster-wide rule. names is "" (any name), ownWebhooks (the rule must
// name only webhook configurations rendered for the same logical cloud
// and cluster) or the names, comma-separated.
type grant struct {
	group, resource, verb, names string
}

const ownWebhooks = "<own webhooks>"

// clusterWide is everything a rendered ClusterRole may grant (docs/mesh.md,
// "A mesh on a shared cluster"): reads that istiod's informers make
// cluster-wide, the review APIs, and webhook writes by name.
var clusterWide = func() map[grant]bool {
	out := map[grant]bool{}
	add := func(groups, resources, verbs []string, names string) {
		for _, g := range groups {
			for _, r := range resources {
				for _, v := range verbs {
					out[grant{g, r, v, names}] = true
				}
			}
		}
	}
	read := []string{"get", "list", "watch"}
	istio := []string{"config.istio.io", "security.istio.io", "networking.istio.io", "authentication.istio.io",
		"rbac.istio.io", "telemetry.istio.io", "extensions.istio.io"}
	add(istio, []string{"*"}, read, "")
	add([]string{""}, []string{"pods", "nodes", "services", "namespaces", "endpoints", "replicationcontrollers"}, read, "")
	add([]string{"discovery.k8s.io"}, []string{"endpointslices"}, read, "")
	add([]string{"networking.k8s.io"}, []string{"ingresses"}, read, "")
	add([]string{"apiextensions.k8s.io"}, []string{"customresourcedefinitions"}, read, "")
	add([]string{"apps"}, []string{"replicasets"}, read, "")
	add([]string{"gateway.networking.k8s.io", "gateway.networking.x-k8s.io", "networking.x-k8s.io"}, []string{"*", "gateways", "gatewayclasses"}, read, "")
	// The namespace controller's two ConfigMaps, by name, in every
	// namespace (no Secret at all: the credentials controller is off).
	add([]string{""}, []string{"configmaps"}, []string{"list", "watch"}, "istio-ca-crl,istio-ca-root-cert")
	add([]string{"authentication.k8s.io"}, []string{"tokenreviews"}, []string{"create"}, "")
	add([]string{"authorization.k8s.io"}, []string{"subjectaccessreviews"}, []string{"create"}, "")
	add([]string{"admissionregistration.k8s.io"}, []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
		[]string{"list", "watch"}, "")
	add([]string{"admissionregistration.k8s.io"}, []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
		[]string{"get", "update", "patch"}, ownWebhooks)
	return out
}()

type rule struct {
	APIGroups     []string `json:"apiGroups"`
	Resources     []string `json:"resources"`
	Verbs         []string `json:"verbs"`
	ResourceNames []string `json:"resourceNames"`
}

func rulesOf(t *testing.T, raw map[string]any) []rule {
	t.Helper()
	var out []rule
	rs, _ := raw["rules"].([]any)
	for _, r := range rs {
		m := r.(map[string]any)
		strs := func(k string) []string {
			var s []string
			l, _ := m[k].([]any)
			for _, v := range l {
				s = append(s, v.(string))
			}
			return s
		}
		out = append(out, rule{strs("apiGroups"), strs("resources"), strs("verbs"), strs("resourceNames")})
	}
	return out
}

// TestClusterRolesAllowListed holds every ClusterRole that the three charts
// and DCM render (istiod's, the reader's, any gateway's) against
// clusterWide, and every ClusterRoleBinding to a ServiceAccount of the
// logical cloud's istio namespace and a ClusterRole of the same rendering.
func TestClusterRolesAllowListed(t *testing.T) {
	t.Parallel()
	in := input("p1", "lc1", "lc1-istio-system")
	out, err := render.Render(in)
	require.NoError(t, err)
	for _, c := range out {
		webhooks := map[string]bool{}
		roles := map[string]bool{}
		for _, m := range c.Manifests {
			o := parse(t, m.JSON)
			switch o.Kind {
			case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
				webhooks[o.Metadata.Name] = true
			case "ClusterRole":
				roles[o.Metadata.Name] = true
			}
		}
		var refused []string
		for _, m := range c.Manifests {
			o := parse(t, m.JSON)
			switch o.Kind {
			case "ClusterRole":
				require.Nil(t, o.raw["aggregationRule"], "ClusterRole %s aggregates", o.Metadata.Name)
				for _, r := range rulesOf(t, o.raw) {
					for _, g := range r.APIGroups {
						for _, res := range r.Resources {
							for _, v := range r.Verbs {
								names := strings.Join(r.ResourceNames, ",")
								if strings.HasSuffix(res, "webhookconfigurations") && names != "" {
									for _, n := range r.ResourceNames {
										if !webhooks[n] {
											refused = append(refused, fmt.Sprintf("%s: %s/%s %s names %s, not a webhook of this logical cloud", o.Metadata.Name, g, res, v, n))
										}
									}
									names = ownWebhooks
								}
								if !clusterWide[grant{g, res, v, names}] {
									refused = append(refused, fmt.Sprintf("%s: %q/%s %s %s", o.Metadata.Name, g, res, v, strings.Join(r.ResourceNames, ",")))
								}
							}
						}
					}
				}
			case "ClusterRoleBinding":
				ref := o.raw["roleRef"].(map[string]any)
				require.Equal(t, "ClusterRole", ref["kind"])
				require.True(t, roles[ref["name"].(string)], "%s binds %s, rendered here", o.Metadata.Name, ref["name"])
				for _, s := range o.raw["subjects"].([]any) {
					sm := s.(map[string]any)
					require.Equal(t, "ServiceAccount", sm["kind"], o.Metadata.Name)
					require.Equal(t, in.IstioNamespace, sm["namespace"], o.Metadata.Name)
				}
			}
		}
		sort.Strings(refused)
		refused = slices.Compact(refused)
		require.Empty(t, refused, "cluster %s: grants outside the allow-list:\n%s", c.Cluster, strings.Join(refused, "\n"))
	}
}

// TestNamespacedRBACStaysInTheLogicalCloud: Roles and RoleBindings are
// only in the logical cloud's two namespaces, bind only its istio
// namespace's ServiceAccounts (istiod's; the reader's to its ConfigMaps),
// and no gateway's ServiceAccount may read secrets (the istio namespace
// holds the CA key).
func TestNamespacedRBACStaysInTheLogicalCloud(t *testing.T) {
	t.Parallel()
	in := input("p1", "lc1", "lc1-istio-system")
	out, err := render.Render(in)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, m := range out[0].Manifests {
		o := parse(t, m.JSON)
		switch o.Kind {
		case "Role":
			require.Contains(t, []string{in.IstioNamespace, in.WorkloadNamespace}, o.Metadata.Namespace, o.Metadata.Name)
			for _, r := range rulesOf(t, o.raw) {
				require.NotContains(t, r.Verbs, "*", o.Metadata.Name)
				require.NotContains(t, r.Resources, "*", o.Metadata.Name)
				require.NotContains(t, r.Resources, "deployments", o.Metadata.Name)
				require.NotContains(t, r.Resources, "roles", o.Metadata.Name)
				require.NotContains(t, r.Resources, "rolebindings", o.Metadata.Name)
			}
		case "RoleBinding":
			seen[o.Metadata.Namespace] = true
			require.Contains(t, []string{in.IstioNamespace, in.WorkloadNamespace}, o.Metadata.Namespace, o.Metadata.Name)
			for _, s := range o.raw["subjects"].([]any) {
				sm := s.(map[string]any)
				require.Equal(t, "ServiceAccount", sm["kind"])
				// Only istiod, and in the istio namespace the reader (another
				// cluster's istiod reads the mesh config there); gateways
				// need no Kubernetes API.
				want := "istiod-" + in.Revision
				if o.Metadata.Name == render.ReaderRoleName(in.Revision) {
					want = "istio-reader-service-account"
					require.Equal(t, in.IstioNamespace, o.Metadata.Namespace)
				}
				require.Equal(t, want, sm["name"])
				ns, _ := sm["namespace"].(string)
				require.Equal(t, in.IstioNamespace, ns)
			}
		}
	}
	require.True(t, seen[in.WorkloadNamespace], "istiod writes istio-ca-root-cert in the workload namespace: a Role there")
	require.True(t, seen[in.IstioNamespace])
}

// TestEastWestPassesOnlyWorkloadServices: the cross-network Gateway
// (AUTO_PASSTHROUGH on 15443, open to any source) routes by SNI only to
// the workload namespace's services, never to a Service of the istio
// namespace: istiod's CA (15012) and plaintext xDS (15010) are not
// reachable through it, past the NetworkPolicy on istiod.
func TestEastWestPassesOnlyWorkloadServices(t *testing.T) {
	t.Parallel()
	in := input("p1", "lc1", "lc1-istio-system")
	out, err := render.Render(in)
	require.NoError(t, err)
	var hosts []string
	var services []string
	for _, m := range out[0].Manifests {
		o := parse(t, m.JSON)
		switch o.Kind {
		case "Gateway":
			for _, s := range o.raw["spec"].(map[string]any)["servers"].([]any) {
				for _, h := range s.(map[string]any)["hosts"].([]any) {
					hosts = append(hosts, h.(string))
				}
			}
		case "Service":
			services = append(services, o.Metadata.Name+"."+o.Metadata.Namespace+".svc.cluster.local")
		}
	}
	require.Equal(t, []string{"*.lc1-ns.svc.cluster.local"}, hosts)
	matches := func(h, fqdn string) bool {
		return h == fqdn || (strings.HasPrefix(h, "*") && strings.HasSuffix(fqdn, h[1:]))
	}
	require.Contains(t, services, "istiod-"+in.Revision+"."+in.IstioNamespace+".svc.cluster.local")
	for _, s := range services {
		for _, h := range hosts {
			require.False(t, matches(h, s), "the east-west gateway passes %s (host %s)", s, h)
		}
	}
	require.True(t, matches(hosts[0], "shop.lc1-ns.svc.cluster.local"))
}
