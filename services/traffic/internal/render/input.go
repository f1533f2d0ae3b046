// Package render turns a traffic intent group's intents into Istio objects
// (networking.istio.io/v1, security.istio.io/v1) and external-dns
// DNSEndpoint records, per cluster of the logical cloud (docs/traffic.md).
// It is pure: the same Input gives byte-identical manifests.
package render

import (
	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
)

// Target is a cluster of the logical cloud, as core tells it.
type Target struct {
	Provider, Cluster string
	// Labels are the cluster's labels in the registry.
	Labels []string
	// Address is the cluster reference's loadbalancer-ip: the east-west
	// and ingress gateways' address (empty: none known).
	Address string
}

// Input is everything a group renders from.
type Input struct {
	Project, CompositeApp, Version, Group string
	// LogicalCloud, Namespace (its workload namespace), IstioNamespace and
	// Revision are the logical cloud's, as core holds them.
	LogicalCloud, Namespace, IstioNamespace, Revision string
	// Clusters of the logical cloud, ordered by provider and name.
	Clusters []Target

	// The group's intents, each kind ordered by name.
	Intercluster []*trafficv1.InterclusterIntent
	Intracluster []*trafficv1.ConnectivityIntent
	Outbound     []*trafficv1.ConnectivityIntent
	Inbound      []*trafficv1.ConnectivityIntent
	// DNS are the DNS provider intents (credentials are not read here).
	DNS []*trafficv1.DnsProviderIntent
}

// ClusterManifests are the objects of one cluster, in apply order.
type ClusterManifests struct {
	Provider, Cluster string
	Manifests         []string
}

// DNSRun is what one DNS provider entry publishes: the external-dns run
// that keeps its record in the provider reads the DNSEndpoints carrying
// Selector on each of Clusters.
type DNSRun struct {
	// Intent is the DNS provider intent's name; ID the entry's id.
	Intent, ID string
	// ExternalName is the published name; Provider external-dns's provider.
	ExternalName, Provider string
	// Clusters publishing their address, in Input order.
	Clusters []Target
	// Selector are the labels of this run's DNSEndpoint objects.
	Selector map[string]string
	// Namespace and ServiceAccount are whom the run reads the
	// DNSEndpoints as, on each of Clusters (the group's DNS reader).
	Namespace, ServiceAccount string
}
