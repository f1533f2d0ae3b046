package traffic

// The store collections the traffic controller service opens for its API
// (package dns opens the DNS runs' own, dns.Collections). Every
// store.NewRecords call of the package names one of these constants, and
// Collections lists them all: docs/store.md's database roles are generated
// from that list (services/allinone/cmd/storedoc), and its test fails when
// the service opens a collection the list leaves out.
const (
	// IntentGroupsCollection holds the traffic intent groups.
	IntentGroupsCollection = "traffic_intent_groups"
	// InterclusterIntentsCollection holds the inter-cluster intents.
	InterclusterIntentsCollection = "traffic_intercluster_intents"
	// IntraclusterIntentsCollection holds the intra-cluster intents.
	IntraclusterIntentsCollection = "traffic_intracluster_intents"
	// ExternalOutboundIntentsCollection holds the external outbound intents.
	ExternalOutboundIntentsCollection = "traffic_external_outbound_intents"
	// ExternalInboundIntentsCollection holds the external inbound intents.
	ExternalInboundIntentsCollection = "traffic_external_inbound_intents"
	// DNSProviderIntentsCollection holds the DNS provider intents.
	DNSProviderIntentsCollection = "traffic_dns_provider_intents"
	// FactsCollection is the service's copy of the logical clouds' facts,
	// which core tells it (platform/facts: <service>_logical_clouds).
	FactsCollection = "traffic_logical_clouds"
)

// Collections are the store collections of the constants above: the
// traffic controller service's database user needs each of them (docs/store.md).
var Collections = []string{IntentGroupsCollection, InterclusterIntentsCollection, IntraclusterIntentsCollection, ExternalOutboundIntentsCollection, ExternalInboundIntentsCollection, DNSProviderIntentsCollection, FactsCollection}
