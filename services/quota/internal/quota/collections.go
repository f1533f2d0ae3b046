package quota

// The store collections the quota service opens. Every store.NewRecords call
// of the package names one of these constants, and Collections lists them
// all: docs/store.md's database roles are generated from that list
// (services/allinone/cmd/storedoc), and its test fails when the service
// opens a collection the list leaves out.
const (
	// QuotasCollection holds the logical clouds' quotas.
	QuotasCollection = "quotas"
	// ContainerDefaultsCollection holds the logical clouds' container defaults.
	ContainerDefaultsCollection = "container_defaults"
	// FactsCollection is the service's copy of the logical clouds' facts,
	// which core tells it (platform/facts: <service>_logical_clouds).
	FactsCollection = "quota_logical_clouds"
)

// Collections are the store collections of the constants above: the
// quota service's database user needs each of them (docs/store.md).
var Collections = []string{QuotasCollection, ContainerDefaultsCollection, FactsCollection}
