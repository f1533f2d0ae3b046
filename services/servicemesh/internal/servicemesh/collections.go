package servicemesh

// The store collections the service mesh service opens. Every
// store.NewRecords call of the package names one of these constants, and
// Collections lists them all: docs/store.md's database roles are generated
// from that list (services/allinone/cmd/storedoc), and its test fails when
// the service opens a collection the list leaves out.
const (
	// ControlPlanesCollection holds the control planes.
	ControlPlanesCollection = "control_planes"
	// ServiceMeshesCollection holds the service meshes.
	ServiceMeshesCollection = "service_meshes"
)

// Collections are the store collections of the constants above: the
// service mesh service's database user needs each of them (docs/store.md).
var Collections = []string{ControlPlanesCollection, ServiceMeshesCollection}
