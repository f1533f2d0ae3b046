package engine

// The store collections the resource synchronizer opens for its engine.
// Every store.NewRecords, store.NewStamps and store.NewLeases call of the
// package names one of these constants, and Collections lists them all:
// docs/store.md's database roles are generated from that list
// (services/allinone/cmd/storedoc), and its test fails when the service
// opens a collection the list leaves out.
const (
	// RolloutsCollection holds the rollouts (desired state).
	RolloutsCollection = "rollouts"
	// ClusterStatesCollection holds each rollout's state on each cluster
	// (statejournal.go).
	ClusterStatesCollection = "rollout_clusters"
	// StampsCollection holds the version of each rollout, for replicas that
	// poll for changes.
	StampsCollection = "rollout_stamps"
	// LeaseCollection holds the replicas' leases of the shards.
	LeaseCollection = "rsync_leases"
	// HealthCollection holds each registered cluster's latest probe
	// result (health.go).
	HealthCollection = "rsync_cluster_health"
)

// Collections are the store collections of the constants above: the
// resource synchronizer's database user needs each of them (docs/store.md).
var Collections = []string{RolloutsCollection, ClusterStatesCollection, StampsCollection, LeaseCollection, HealthCollection}
