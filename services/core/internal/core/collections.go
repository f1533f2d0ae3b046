package core

import "github.com/dcm-project/dcm/platform/store"

// The store collections the core service opens. Every store.NewRecords and
// store.NewLeases call of the package names one of these constants, and
// Collections lists them all: docs/store.md's database roles are generated
// from that list (services/allinone/cmd/storedoc), and its test fails when
// the service opens a collection the list leaves out.
const (
	// ProjectsCollection holds the projects.
	ProjectsCollection = "projects"
	// LogicalCloudsCollection holds the logical clouds.
	LogicalCloudsCollection = "logical_clouds"
	// LogicalCloudMarksCollection holds, per project, the change mark of
	// its logical clouds: their reads are kept in memory (store.CacheReads).
	LogicalCloudMarksCollection = "logical_clouds_marks"
	// ClusterReferencesCollection holds the logical clouds' cluster references.
	ClusterReferencesCollection = "cluster_references"
	// KvPairsCollection holds the logical clouds' key-value pairs.
	KvPairsCollection = "kv_pairs"
	// MeshClustersCollection holds, per cluster, the meshes that span it.
	MeshClustersCollection = "mesh_clusters"
	// TrafficRolloutsCollection holds core's records of applied traffic intent
	// groups.
	TrafficRolloutsCollection = "traffic_rollouts"
	// TokensCollection holds the token service's tokens (their hashes).
	TokensCollection = "tokens"
	// LockCollection is the store collection of core's transition locks.
	LockCollection = "core_locks"
	// ClusterSetsCollection holds the cluster sets (clustersets.go).
	ClusterSetsCollection = "cluster_sets"
	// ClusterSetBindingsCollection holds the cluster sets' bindings to
	// projects.
	ClusterSetBindingsCollection = "cluster_set_bindings"
)

// Collections are the core service's store collections, the constants
// above: its database user needs each of them and no other.
var Collections = []string{
	ProjectsCollection, LogicalCloudsCollection, LogicalCloudMarksCollection, ClusterReferencesCollection, KvPairsCollection,
	MeshClustersCollection, TrafficRolloutsCollection, TokensCollection, LockCollection,
	ClusterSetsCollection, ClusterSetBindingsCollection,
}

// A page of logical clouds is the most read list (every list page and GET
// shows them); its reads are kept in memory, checked against the project's
// change mark (docs/store.md, "Reads kept in memory").
func init() { store.CacheReads(LogicalCloudsCollection, LogicalCloudMarksCollection) }
