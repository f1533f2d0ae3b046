package cadist

// The store collections the CA distribution service opens. Every
// store.NewRecords call of the package names one of these constants, and
// Collections lists them all: docs/store.md's database roles are generated
// from that list (services/allinone/cmd/storedoc), and its test fails when
// the service opens a collection the list leaves out.
const (
	// RootsCollection holds the root CAs.
	RootsCollection = "ca_roots"
	// IntermediatesCollection holds the intermediate CA bundles.
	IntermediatesCollection = "ca_intermediates"
	// LogicalCloudCAsCollection holds the logical clouds' CAs.
	LogicalCloudCAsCollection = "ca_logical_clouds"
)

// Collections are the store collections of the constants above: the
// CA distribution service's database user needs each of them (docs/store.md).
var Collections = []string{RootsCollection, IntermediatesCollection, LogicalCloudCAsCollection}
