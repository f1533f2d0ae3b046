package render

import (
	"github.com/dcm-project/dcm/platform/kube"
)

// NetworkPolicies of a logical cloud's istio namespace (docs/mesh.md,
// "Network policies"): istiod's CA (15012), plaintext xDS (15010),
// monitoring (15014) and debug (8080) ports admit only the logical
// cloud's own namespaces (the namespaces carrying DCM's project and
// logical cloud labels: its workload namespace and this one, where the
// gateways run); its webhook port (15017) admits any source, since the
// API server is no pod a policy can select. The gateways keep their
// published ports: east-west 15443 (mTLS passthrough from other clusters),
// 15021 (status), and 15012/15017 (istiod through the gateway); ingress
// 80/443 from anywhere; egress 80/443 from the logical cloud's namespaces.
// Everything else arriving in the namespace is denied. Egress is not
// restricted (istiod fetches JWKS from user-defined URLs). The kubelet's
// probes from the node are always allowed by NetworkPolicy semantics.
//
// A cluster enforces them only if its network plugin implements
// NetworkPolicy; DCM renders and applies them regardless.

// Names of the NetworkPolicies.
const (
	NetpolDefaultDeny = "dcm-default-deny-ingress"
	NetpolIstiod      = "dcm-istiod"
	NetpolEastWest    = "dcm-eastwestgateway"
	NetpolIngress     = "dcm-ingressgateway"
	NetpolEgress      = "dcm-egressgateway"
)

// Istiod's ports.
const (
	IstiodXDSPort        = 15010
	IstiodCAPort         = 15012
	IstiodMonitoringPort = 15014
	IstiodWebhookPort    = 15017
	IstiodHTTPPort       = 8080
	StatusPort           = 15021
)

func tcpPorts(ports ...int) []any { return kube.Ports("TCP", ports...) }

// networkPolicies are the istio namespace's NetworkPolicies.
func networkPolicies(in Input) []string {
	labels := kube.Labels(in.Project, in.LogicalCloud)
	own := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": labels}}}
	meta := func(name string) kube.Meta {
		return kube.Meta{Name: name, Namespace: in.IstioNamespace, Labels: labels}
	}
	ingress := []string{"Ingress"}
	policy := func(name string, pods map[string]any, rules []any) string {
		return kube.NetworkPolicy(meta(name), pods, ingress, rules, nil)
	}
	gw := func(istio, app string) map[string]any { return map[string]any{"istio": istio, "app": app} }
	return []string{
		kube.NetworkPolicy(meta(NetpolDefaultDeny), nil, ingress, nil, nil),
		policy(NetpolIstiod, map[string]any{"app": "istiod", "istio.io/rev": in.Revision}, []any{
			map[string]any{"from": own, "ports": tcpPorts(IstiodXDSPort, IstiodCAPort, IstiodMonitoringPort, IstiodHTTPPort)},
			map[string]any{"ports": tcpPorts(IstiodWebhookPort)},
		}),
		policy(NetpolEastWest, gw("eastwestgateway", EastWestGateway), []any{
			map[string]any{"ports": tcpPorts(EastWestPort, StatusPort, IstiodCAPort, IstiodWebhookPort)},
		}),
		policy(NetpolIngress, gw("ingressgateway", IngressGateway), []any{
			map[string]any{"ports": tcpPorts(80, 443)},
		}),
		policy(NetpolEgress, gw("egressgateway", EgressGateway), []any{
			map[string]any{"from": own, "ports": tcpPorts(80, 443)},
		}),
	}
}

// namespaceGuards are the NetworkPolicies, ResourceQuota and LimitRange
// of the istio namespace.
func namespaceGuards(in Input) ([]object, error) {
	var out []object
	for _, j := range append(networkPolicies(in), quotaManifests(in)...) {
		o, err := parseObject(j)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// crossNetworkHosts are the hosts the east-west gateway passes through by
// SNI (AUTO_PASSTHROUGH): the services of the logical cloud's workload
// namespace only. With "*.local" it passed any service of the mesh,
// istiod's 15010 and 15012 included, to whoever reaches 15443 (open to
// any source, since other clusters come through it), past the
// NetworkPolicy on istiod. Without a known workload namespace: none.
func crossNetworkHosts(in Input) []any {
	if in.WorkloadNamespace == "" {
		return []any{}
	}
	return []any{"*." + in.WorkloadNamespace + ".svc." + DomainSuffix}
}

// DomainSuffix is the clusters' DNS domain (Istio's default, which the
// charts keep).
const DomainSuffix = "cluster.local"
