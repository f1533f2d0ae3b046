// Package dns is the traffic controller's external-dns controller
// (docs/traffic.md "External DNS"): for each DNS provider entry of an
// applied traffic intent group it runs external-dns (the
// sigs.k8s.io/external-dns library: CRD source per cluster, TXT registry,
// plan, provider) periodically, and, once the group is terminated, runs it
// once more with no source so that the records it owns are deleted.
package dns

// Cluster names a cluster a run reads DNSEndpoints from, and whom it
// reads them as: the group's DNS reader ServiceAccount in the logical
// cloud's namespace (applied by the group's rollout; it may get and list
// DNSEndpoints there only).
type Cluster struct {
	Provider, Cluster         string
	Namespace, ServiceAccount string
}

// Run is one DNS provider entry of an applied group.
type Run struct {
	// Group is the store key of the traffic intent group.
	Group string
	// Intent is the DNS provider intent's name; ID the entry's id.
	Intent, ID string
	// ExternalName is the published name.
	ExternalName string
	// Provider is external-dns's provider (rfc2136).
	Provider string
	// Params are external-dns flags without "--" (rfc2136-host...).
	Params map[string]string
	// Credentials are the provider's secrets (sealed at rest, never logged).
	Credentials map[string]string
	// Clusters publishing their address.
	Clusters []Cluster
	// Selector are the labels of the run's DNSEndpoint objects.
	Selector map[string]string
}
