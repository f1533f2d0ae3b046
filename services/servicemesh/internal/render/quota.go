package render

import (
	"strconv"

	"github.com/dcm-project/dcm/platform/kube"
)

// A logical cloud's mesh has a bounded share of a cluster (docs/mesh.md,
// "Quota"): istiod's and each gateway's autoscaler are capped, every
// container has requests and limits (the charts' requests; istiod's
// limits are DCM's, the chart sets none), and the istio namespace's
// ResourceQuota holds exactly istiod and the three gateways at their caps,
// plus one more pod of each for a rolling update. Its LimitRange gives a
// container without figures the defaults below and caps any one.

// Caps of the autoscalers.
const (
	IstiodMaxReplicas  = 2
	GatewayMaxReplicas = 2
)

// Figures per container, in millicores and MiB (the chart's requests).
const (
	istiodCPURequestM  = 500
	istiodMemRequestMi = 2048
	istiodCPULimitM    = 2000
	istiodMemLimitMi   = 4096
	gatewayCPURequestM = 100
	gatewayMemRequestM = 128
	gatewayCPULimitM   = 2000
	gatewayMemLimitMi  = 1024
	// gateways is the number of gateways per logical cloud and cluster.
	gateways = 3
)

// The same as chart values.
var (
	IstiodCPURequest     = milli(istiodCPURequestM)
	IstiodMemoryRequest  = mebi(istiodMemRequestMi)
	IstiodCPULimit       = milli(istiodCPULimitM)
	IstiodMemoryLimit    = mebi(istiodMemLimitMi)
	GatewayCPURequest    = milli(gatewayCPURequestM)
	GatewayMemoryRequest = mebi(gatewayMemRequestM)
	GatewayCPULimit      = milli(gatewayCPULimitM)
	GatewayMemoryLimit   = mebi(gatewayMemLimitMi)
)

func milli(m int) string { return strconv.Itoa(m) + "m" }
func mebi(m int) string  { return strconv.Itoa(m) + "Mi" }

// QuotaName names the istio namespace's ResourceQuota and LimitRange.
const QuotaName = "dcm-mesh"

// MeshQuota is the istio namespace's ResourceQuota: hard figures by
// resource name.
func MeshQuota() map[string]string {
	istiods := IstiodMaxReplicas + 1
	gws := gateways * (GatewayMaxReplicas + 1)
	return map[string]string{
		"pods":                   strconv.Itoa(istiods + gws),
		"requests.cpu":           milli(istiods*istiodCPURequestM + gws*gatewayCPURequestM),
		"requests.memory":        mebi(istiods*istiodMemRequestMi + gws*gatewayMemRequestM),
		"limits.cpu":             milli(istiods*istiodCPULimitM + gws*gatewayCPULimitM),
		"limits.memory":          mebi(istiods*istiodMemLimitMi + gws*gatewayMemLimitMi),
		"services.loadbalancers": "2", // east-west and ingress (one address)
	}
}

func quotaManifests(in Input) []string {
	labels := kube.Labels(in.Project, in.LogicalCloud)
	meta := kube.Meta{Name: QuotaName, Namespace: in.IstioNamespace, Labels: labels}
	hard := map[string]any{}
	for k, v := range MeshQuota() {
		hard[k] = v
	}
	return []string{
		kube.Manifest("v1", "ResourceQuota", meta, map[string]any{"spec": map[string]any{"hard": hard}}),
		kube.Manifest("v1", "LimitRange", meta, map[string]any{"spec": map[string]any{"limits": []any{map[string]any{
			"type":           "Container",
			"default":        map[string]any{"cpu": GatewayCPULimit, "memory": GatewayMemoryLimit},
			"defaultRequest": map[string]any{"cpu": GatewayCPURequest, "memory": GatewayMemoryRequest},
			"max":            map[string]any{"cpu": IstiodCPULimit, "memory": IstiodMemoryLimit},
		}}}}),
	}
}
