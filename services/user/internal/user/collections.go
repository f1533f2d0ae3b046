package user

import "github.com/dcm-project/dcm/platform/store"

// The store collections the user service opens. Every store.NewRecords call
// of the package names one of these constants, and Collections lists them
// all: docs/store.md's database roles are generated from that list
// (services/allinone/cmd/storedoc), and its test fails when the service
// opens a collection the list leaves out.
const (
	// UsersCollection holds the users.
	UsersCollection = "users"
	// PermissionsCollection holds the users' permissions.
	PermissionsCollection = "user_permissions"
	// PermissionMarksCollection holds, per project, the change mark of its
	// permissions: their reads are kept in memory (store.CacheReads).
	PermissionMarksCollection = "user_permissions_marks"
	// MigrationsCollection holds a record per one-time migration done
	// (AssignOwners).
	MigrationsCollection = "user_migrations"
	// FactsCollection is the service's copy of the logical clouds' facts,
	// which core tells it (platform/facts: <service>_logical_clouds).
	FactsCollection = "user_logical_clouds"
)

// Collections are the store collections of the constants above: the
// user service's database user needs each of them (docs/store.md).
var Collections = []string{UsersCollection, PermissionsCollection, PermissionMarksCollection, MigrationsCollection, FactsCollection}

// Core shows every logical cloud it answers with its permissions (one
// ListLogicalCloudsPermissions per page, one ListLogicalCloudPermissions
// per GET): their reads are kept in memory, checked against the project's
// change mark (docs/store.md, "Reads kept in memory").
func init() { store.CacheReads(PermissionsCollection, PermissionMarksCollection) }
