package rsync

// The store collections the resource synchronizer opens for its API (package
// engine opens the engine's own, engine.Collections). Every store.NewRecords
// call of the package names one of these constants, and Collections lists
// them all: docs/store.md's database roles are generated from that list
// (services/allinone/cmd/storedoc), and its test fails when the service
// opens a collection the list leaves out.
const (
	// ProvidersCollection holds the cluster providers.
	ProvidersCollection = "cluster_providers"
	// ClustersCollection holds the clusters.
	ClustersCollection = "clusters"
	// HoldsCollection holds which logical clouds hold each cluster.
	HoldsCollection = "cluster_holds"
)

// Collections are the store collections of the constants above: the
// resource synchronizer's database user needs each of them (docs/store.md).
var Collections = []string{ProvidersCollection, ClustersCollection, HoldsCollection}
