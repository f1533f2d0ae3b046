package namespace

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
)

// A logical cloud's namespace gets two NetworkPolicies on every cluster
// (docs/logical-clouds.md, "Network policies"), selecting all of its pods:
//
//   - dcm-ingress admits traffic only from the pods of its own namespace,
//     of its Istio namespace when its service mesh is enabled (the
//     gateways and istiod), and of the namespaces of the logical clouds
//     its spec.allow-ingress-from names;
//   - dcm-egress lets traffic out only to its own namespace, its Istio
//     namespace, cluster DNS (kube-dns pods in kube-system, UDP and TCP
//     53), the namespaces of DCM's logical clouds (those labelled
//     dcm.io/logical-cloud: what gets in there is their own dcm-ingress's
//     decision) and the installation's DCM_TENANT_EGRESS_CIDRS.
//
// Peers select namespaces by the name label the API server sets
// (kubernetes.io/metadata.name), which no tenant can change. A cluster
// enforces them only if its network plugin implements NetworkPolicy.

// Names of the NetworkPolicies.
const (
	NetpolIngress = "dcm-ingress"
	NetpolEgress  = "dcm-egress"
)

// DNS is the cluster DNS the pods may ask: the kube-dns pods (CoreDNS
// keeps the label) of kube-system.
const (
	DNSNamespace = "kube-system"
	DNSAppLabel  = "k8s-app"
	DNSApp       = "kube-dns"
	DNSPort      = 53
)

// networkPolicies are the NetworkPolicies of logical cloud lc's namespace
// ns; istioNS is its Istio namespace (empty without a service mesh),
// ingressFrom the namespaces its spec.allow-ingress-from names. The same
// input gives the same bytes.
func (s *Service) networkPolicies(project, lc, ns, istioNS string, ingressFrom []string) []string {
	meta := func(name string) kube.Meta {
		return kube.Meta{Name: name, Namespace: ns, Labels: kube.Labels(project, lc)}
	}
	own := []any{kube.NamespacePeer(ns)}
	if istioNS != "" {
		own = append(own, kube.NamespacePeer(istioNS))
	}
	from := append([]any{}, own...)
	for _, n := range ingressFrom {
		from = append(from, kube.NamespacePeer(n))
	}
	dns := map[string]any{
		"namespaceSelector": kube.NamespacePeer(DNSNamespace)["namespaceSelector"],
		"podSelector":       map[string]any{"matchLabels": map[string]any{DNSAppLabel: DNSApp}},
	}
	logicalClouds := map[string]any{"namespaceSelector": map[string]any{"matchExpressions": []any{
		map[string]any{"key": kube.LogicalCloudLabel, "operator": "Exists"},
	}}}
	egress := []any{
		map[string]any{"to": own},
		map[string]any{"to": []any{dns}, "ports": append(kube.Ports("UDP", DNSPort), kube.Ports("TCP", DNSPort)...)},
		map[string]any{"to": []any{logicalClouds}},
	}
	if len(s.egressCIDRs) > 0 {
		var blocks []any
		for _, c := range s.egressCIDRs {
			blocks = append(blocks, map[string]any{"ipBlock": map[string]any{"cidr": c}})
		}
		egress = append(egress, map[string]any{"to": blocks})
	}
	return []string{
		kube.NetworkPolicy(meta(NetpolIngress), nil, []string{"Ingress"}, []any{map[string]any{"from": from}}, nil),
		kube.NetworkPolicy(meta(NetpolEgress), nil, []string{"Egress"}, nil, egress),
	}
}

// checkNamespaces refuses an Istio namespace or a namespace to admit
// traffic from that is no namespace name (core resolved them; a request
// from elsewhere gets a clear refusal).
func checkNamespaces(req *namespacev1.RenderNamespaceRequest) error {
	check := func(field, ns string) error {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return errs.Invalid(field, "%q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
		}
		return nil
	}
	if ns := req.GetIstioNamespace(); ns != "" {
		if err := check("istio-namespace", ns); err != nil {
			return err
		}
	}
	for i, ns := range req.GetIngressFrom() {
		if err := check(fmt.Sprintf("ingress-from[%d]", i), ns); err != nil {
			return err
		}
	}
	return nil
}
