package dns

// The store collections the traffic controller service opens for its
// external-dns runs. Every store.NewRecords and store.NewLeases call of the
// package names one of these constants, and Collections lists them all:
// docs/store.md's database roles are generated from that list
// (services/allinone/cmd/storedoc), and its test fails when the service
// opens a collection the list leaves out.
const (
	// AllowListCollection is the store collection of the allow-lists, one
	// record per project (its id is the project's name).
	AllowListCollection = "dns_allow_lists"
	// RunsCollection holds the state of the external-dns runs.
	RunsCollection = "dns_runs"
	// LeaseCollection is the store collection of the DNS runs' leases.
	LeaseCollection = "dns_leases"
)

// Collections are the store collections of the constants above: the
// traffic controller service's database user needs each of them (docs/store.md).
var Collections = []string{AllowListCollection, RunsCollection, LeaseCollection}
