package kube

import (
	"fmt"
	"net/netip"
)

// NetworkPolicy objects, shared by the renderers that put them on
// clusters (a logical cloud's namespace, its Istio namespace).

// NamespaceNameLabel is the label the API server puts on every namespace,
// its name: a policy peer selects a namespace by name with it.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// NetworkPolicy is the NetworkPolicy name of meta's namespace, selecting
// the pods with labels pods (all pods when empty), of the given policy
// types ("Ingress", "Egress"), with its ingress and egress rules (a rule
// is a map with "from"/"to" and "ports"; a type without rules denies all
// of its traffic).
func NetworkPolicy(meta Meta, pods map[string]any, types []string, ingress, egress []any) string {
	spec := map[string]any{"podSelector": map[string]any{}, "policyTypes": types}
	if len(pods) > 0 {
		spec["podSelector"] = map[string]any{"matchLabels": pods}
	}
	if ingress != nil {
		spec["ingress"] = ingress
	}
	if egress != nil {
		spec["egress"] = egress
	}
	return Manifest("networking.k8s.io/v1", "NetworkPolicy", meta, map[string]any{"spec": spec})
}

// Ports are NetworkPolicy ports of protocol (TCP, UDP).
func Ports(protocol string, ports ...int) []any {
	out := make([]any, len(ports))
	for i, p := range ports {
		out[i] = map[string]any{"protocol": protocol, "port": p}
	}
	return out
}

// NamespacePeer is the peer of every pod of namespace ns.
func NamespacePeer(ns string) map[string]any {
	return map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{NamespaceNameLabel: ns}}}
}

// ParseCIDRs reads a comma-separated list of CIDRs (IPv4 or IPv6, e.g.
// "10.0.0.0/8,2001:db8::/32"), blanks dropped. A CIDR whose address has
// bits beyond its prefix ("10.1.2.3/8") is refused rather than guessed at.
// setting names the list in errors.
func ParseCIDRs(setting, text string) ([]string, error) {
	var out []string
	for _, item := range ParseList(text) {
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a CIDR (e.g. 10.0.0.0/8): %v", setting, item, err)
		}
		if p.Masked() != p {
			return nil, fmt.Errorf("%s: %q has bits set beyond its prefix: write %s, or %s/%d for the one address",
				setting, item, p.Masked(), p.Addr(), p.Addr().BitLen())
		}
		out = append(out, p.String())
	}
	return out, nil
}
