package render

import (
	"github.com/dcm-project/dcm/platform/kube"
)

// SharedIPAnnotation is MetalLB's sharing key: Services with the same key
// may hold the same address on different ports.
const SharedIPAnnotation = "metallb.universe.tf/allow-shared-ip"

// release is one chart instance of a cluster.
type release struct {
	dir, name string
	vals      map[string]any
}

// gatewayReleases are the gateway chart's three instances on a cluster:
// east-west (cross-network mTLS passthrough), ingress (the traffic
// controller's inbound hosts) and egress (its outbound exits).
func gatewayReleases(in Input, c Cluster, id string) []release {
	// The cluster reference has one address per logical cloud: the
	// east-west and ingress gateways share it, so MetalLB must be told they
	// may, and their ports must not overlap: east-west has 15021, 15443,
	// 15012, 15017, the ingress only 80 and 443 (not the chart's default
	// status port 15021, which east-west holds on that address).
	shared := map[string]any{SharedIPAnnotation: SharedIPKey(in.Project, in.LogicalCloud)}
	webPorts := []any{
		map[string]any{"name": "http2", "port": 80, "protocol": "TCP", "targetPort": 80},
		map[string]any{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 443},
	}
	eastWest := map[string]any{"annotations": shared}
	ingress := map[string]any{"type": "LoadBalancer", "ports": webPorts, "annotations": shared}
	if c.LoadBalancerIP != "" {
		eastWest["loadBalancerIP"] = c.LoadBalancerIP
		ingress["loadBalancerIP"] = c.LoadBalancerIP
	}
	gw := func(name, istio string, svc map[string]any) map[string]any {
		labels := map[string]any{"istio": istio, "app": name}
		for k, v := range kube.Labels(in.Project, in.LogicalCloud) {
			labels[k] = v
		}
		return map[string]any{
			"name":     name,
			"revision": in.Revision,
			"labels":   labels,
			// The chart names the ServiceAccount after the release; set
			// it anyway: the traffic controller's AuthorizationPolicies
			// name the ingress gateway's principal by it.
			"serviceAccount": map[string]any{"name": name},
			"service":        svc,
			"global":         map[string]any{"hub": in.Hub, "tag": in.Tag, "network": id},
		}
	}
	ew := gw(EastWestGateway, "eastwestgateway", eastWest)
	ew["networkGateway"] = id
	return []release{
		{gatewayChart, EastWestGateway, ew},
		{gatewayChart, IngressGateway, gw(IngressGateway, "ingressgateway", ingress)},
		// The chart's default status port is left out: nothing outside the
		// cluster probes an egress gateway, and only 80/443 are its exits.
		{gatewayChart, EgressGateway, gw(EgressGateway, "egressgateway", map[string]any{"type": "ClusterIP", "ports": webPorts})},
	}
}

// SharedIPKey is the logical cloud's MetalLB sharing key: its gateways
// share its address, another logical cloud's never do. Project and
// logical cloud names hold no "/", so the key is unambiguous.
func SharedIPKey(project, lc string) string { return "dcm/" + project + "/" + lc }

// gatewaySelector selects this logical cloud's east-west gateway only: the
// chart's selector labels and the logical cloud's.
func gatewaySelector(in Input) map[string]string {
	sel := kube.Labels(in.Project, in.LogicalCloud)
	sel["istio"] = "eastwestgateway"
	sel["app"] = EastWestGateway
	return sel
}
