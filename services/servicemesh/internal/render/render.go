package render

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/dcm-project/dcm/platform/kube"
)

// Names and labels of the objects DCM adds around the charts.
const (
	// CACertsSecret is the Secret istiod reads its plugged-in CA from.
	CACertsSecret = "cacerts"
	// EastWestGateway is the east-west gateway's name (its Deployment,
	// Service and ServiceAccount) in the istio namespace.
	EastWestGateway = "istio-eastwestgateway"
	// IngressGateway is the ingress gateway's name (Deployment, Service
	// and ServiceAccount; its pods are labelled istio=ingressgateway).
	IngressGateway = "istio-ingressgateway"
	// EgressGateway is the egress gateway's name (pods labelled
	// istio=egressgateway).
	EgressGateway = "istio-egressgateway"
	// CrossNetworkGateway is the Gateway that exposes the logical cloud's
	// services to its other clusters through the east-west gateway.
	CrossNetworkGateway = "cross-network-gateway"
	// RevisionClaimPrefix names the cluster-scoped object that claims a
	// revision on a cluster: one logical cloud per revision per cluster
	// (the injector selects pods by revision alone).
	RevisionClaimPrefix = "dcm.mesh.revision."
	// DenyAllPolicy names the AuthorizationPolicy that denies every
	// request to the workloads of the logical cloud's namespace until an
	// ALLOW policy (a traffic intent's) admits it. The dot keeps it apart
	// from the traffic controller's names, which have none.
	DenyAllPolicy = "dcm.deny-all"
	// NetworkLabel is Istio's network label (istiod reads its own
	// namespace's).
	NetworkLabel = "topology.istio.io/network"
	// EastWestPort is the east-west gateway's mTLS passthrough port.
	EastWestPort = 15443
	// MaxRevision, the longest revision, keeps istiod's Service name, "istiod-<revision>", a
	// DNS-1123 label.
	MaxRevision = 63 - len("istiod-")
)

// CA is a cluster's intermediate: Istio's cacerts files.
type CA struct {
	CACert, CAKey, CertChain, RootCert string
}

// Cluster is one cluster of the mesh.
type Cluster struct {
	Provider, Cluster string
	// LoadBalancerIP is the east-west gateway's address ("" unknown).
	LoadBalancerIP string
	CA             CA
}

// Input is everything a logical cloud's control planes are made of.
type Input struct {
	Project, LogicalCloud string
	// IstioNamespace is where the control plane runs.
	IstioNamespace string
	// WorkloadNamespace is the logical cloud's own namespace ("" none):
	// istiod's Roles there (rbac.go).
	WorkloadNamespace string
	// Revision is the Istio revision (the logical cloud's name).
	Revision string
	// TrustDomain is the logical cloud's SPIFFE trust domain.
	TrustDomain string
	// Hub and Tag are istiod's and the proxies' images.
	Hub, Tag string
	Clusters []Cluster
}

// Manifest is one object to apply.
type Manifest struct {
	JSON string
	// Sensitive marks the object that holds key material.
	Sensitive bool
}

// ClusterManifests are one cluster's objects.
type ClusterManifests struct {
	Provider, Cluster string
	Manifests         []Manifest
}

// MeshID is the logical cloud's Istio mesh ID.
func MeshID(project, lc string) string { return project + "-" + lc }

// Render makes each cluster's objects, in the input's cluster order.
func Render(in Input) ([]ClusterManifests, error) {
	if in.Revision == "" || len(in.Revision) > MaxRevision {
		return nil, fmt.Errorf("revision %q: 1 to %d characters (istiod-<revision> names a Service)", in.Revision, MaxRevision)
	}
	if in.IstioNamespace == "" || in.TrustDomain == "" || in.Hub == "" || in.Tag == "" {
		return nil, errors.New("istio namespace, trust domain, hub and tag are required")
	}
	if err := checkInput(in); err != nil {
		return nil, err
	}
	networks := meshNetworks(in.Clusters)
	out := make([]ClusterManifests, 0, len(in.Clusters))
	for _, c := range in.Clusters {
		objs, err := clusterObjects(in, c, networks)
		if err != nil {
			return nil, fmt.Errorf("cluster %s/%s: %w", c.Provider, c.Cluster, err)
		}
		cm := ClusterManifests{Provider: c.Provider, Cluster: c.Cluster}
		for _, o := range objs {
			j, err := o.json()
			if err != nil {
				return nil, err
			}
			cm.Manifests = append(cm.Manifests, Manifest{JSON: j, Sensitive: isCACerts(o)})
		}
		out = append(out, cm)
	}
	return out, nil
}

func isCACerts(o object) bool { return o.str("kind") == "Secret" && o.name() == CACertsSecret }

// meshNetworks is Istio's meshNetworks: each cluster's network, its
// endpoints from its registry and its east-west gateway when its address
// is known.
func meshNetworks(clusters []Cluster) map[string]any {
	nets := map[string]any{}
	for _, c := range clusters {
		id := kube.MeshClusterID(c.Provider, c.Cluster)
		n := map[string]any{"endpoints": []any{map[string]any{"fromRegistry": id}}}
		if c.LoadBalancerIP != "" {
			n["gateways"] = []any{map[string]any{"address": c.LoadBalancerIP, "port": EastWestPort}}
		}
		nets[id] = n
	}
	return nets
}

func clusterObjects(in Input, c Cluster, networks map[string]any) ([]object, error) {
	id := kube.MeshClusterID(c.Provider, c.Cluster)
	labels := kube.Labels(in.Project, in.LogicalCloud)
	var objs []object
	add := func(j string) error {
		o, err := parseObject(j)
		if err != nil {
			return err
		}
		objs = append(objs, o)
		return nil
	}
	nsLabels := kube.Labels(in.Project, in.LogicalCloud)
	nsLabels[NetworkLabel] = id
	if err := add(kube.Manifest("v1", "Namespace", kube.Meta{Name: in.IstioNamespace, Labels: nsLabels}, nil)); err != nil {
		return nil, err
	}
	b64 := base64.StdEncoding.EncodeToString
	if err := add(kube.Manifest("v1", "Secret", kube.Meta{Name: CACertsSecret, Namespace: in.IstioNamespace, Labels: labels}, map[string]any{
		"type": "Opaque",
		"data": map[string]string{
			"ca-cert.pem":    b64([]byte(c.CA.CACert)),
			"ca-key.pem":     b64([]byte(c.CA.CAKey)),
			"root-cert.pem":  b64([]byte(c.CA.RootCert)),
			"cert-chain.pem": b64([]byte(c.CA.CertChain)),
		},
	})); err != nil {
		return nil, err
	}
	// The claim: an empty ClusterRole named by the revision alone, so a
	// second logical cloud with the same revision on this cluster is
	// refused by rsync's one-owner rule.
	if err := add(kube.Manifest("rbac.authorization.k8s.io/v1", "ClusterRole", kube.Meta{Name: RevisionClaimPrefix + in.Revision, Labels: labels},
		map[string]any{"rules": []any{}})); err != nil {
		return nil, err
	}
	if err := add(kube.Manifest("networking.istio.io/v1", "Gateway", kube.Meta{Name: CrossNetworkGateway, Namespace: in.IstioNamespace, Labels: labels}, map[string]any{
		"spec": map[string]any{
			"selector": gatewaySelector(in),
			"servers": []any{map[string]any{
				"port":  map[string]any{"number": EastWestPort, "name": "tls", "protocol": "TLS"},
				"tls":   map[string]any{"mode": "AUTO_PASSTHROUGH"},
				"hosts": crossNetworkHosts(in), // netpol.go
			}},
		},
	})); err != nil {
		return nil, err
	}
	// Seed 004's deny-all "during istio installation": in the workload
	// namespace an ALLOW AuthorizationPolicy that matches nothing
	// (kube.DenyAllPolicySpec), so its workloads, Envoy's and proxyless
	// gRPC's, take no request (from inside or outside the mesh) until a
	// traffic intent's ALLOW policy names the clients: Istio allows what
	// any ALLOW policy matches. The Istio namespace has none: its gateways
	// carry the traffic intents route.
	if in.WorkloadNamespace != "" {
		if err := add(kube.Manifest("security.istio.io/v1", "AuthorizationPolicy", kube.Meta{Name: DenyAllPolicy, Namespace: in.WorkloadNamespace, Labels: labels},
			map[string]any{"spec": kube.DenyAllPolicySpec()})); err != nil {
			return nil, err
		}
	}
	releases := append([]release{
		{baseChart, "base-" + in.Revision, map[string]any{
			"defaultRevision": "",
			"global":          map[string]any{"istioNamespace": in.IstioNamespace, "resourceScope": "namespace"},
		}},
		{discoveryChart, "istiod-" + in.Revision, istiodValues(in, id, networks)},
	}, gatewayReleases(in, c, id)...)
	releases = tuneReleases(releases) // rbac.go
	for _, chart := range releases {
		if err := checkValues(chart.dir, chart.vals); err != nil {
			return nil, err
		}
		docs, err := renderChart(chart.dir, chart.name, in.IstioNamespace, chart.vals)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			o, err := parseChartDoc(d)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", chart.dir, err)
			}
			if err := scopeWebhooks(o, labels); err != nil {
				return nil, err
			}
			if err := checkChartObject(in, c, chart, o); err != nil {
				return nil, err
			}
			o.addLabels(labels)
			objs = append(objs, o)
		}
	}
	objs, err := confine(in, objs) // rbac.go
	if err != nil {
		return nil, err
	}
	sortObjects(objs)
	return objs, nil
}

func istiodValues(in Input, id string, networks map[string]any) map[string]any {
	return map[string]any{
		"revision": in.Revision,
		"global": map[string]any{
			"istioNamespace": in.IstioNamespace,
			"hub":            in.Hub,
			"tag":            in.Tag,
			"meshID":         MeshID(in.Project, in.LogicalCloud),
			"multiCluster":   map[string]any{"clusterName": id},
			"network":        id,
			"meshNetworks":   networks,
		},
		"meshConfig": map[string]any{
			"trustDomain": in.TrustDomain,
			// The logical cloud's namespaces (workload and istio) carry
			// both labels; no other namespace does.
			"discoverySelectors": []any{map[string]any{"matchLabels": kube.Labels(in.Project, in.LogicalCloud)}},
			// Sidecars answer DNS themselves, so that clients resolve the
			// hosts of the traffic controller's ServiceEntries (remote
			// services, external hosts) that no cluster DNS knows.
			"defaultConfig": map[string]any{"proxyMetadata": map[string]any{"ISTIO_META_DNS_CAPTURE": "true"}},
		},
		"base": map[string]any{"validationFailurePolicy": "Fail"},
		"env": map[string]any{
			// Root rotation: istiod accepts a root-cert.pem that adds or
			// drops a root (the overlap of issue 17's rotation).
			"ISTIO_MULTIROOT_MESH": "true",
			// Addresses for ServiceEntries without any, which DNS capture
			// answers (so TCP can be routed by address). This is Istio's
			// "auto-allocation v2", on by default in this version; the
			// proxy-side ISTIO_META_DNS_AUTO_ALLOCATE it replaces is
			// deprecated (istiod warns when it is set), so it is not.
			"PILOT_ENABLE_IP_AUTOALLOCATE": "true",
		},
	}
}
