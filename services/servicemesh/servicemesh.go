// Package servicemesh is the service mesh service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package servicemesh

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/servicemesh/internal/servicemesh"
)

// Name is the program name of the service mesh service.
const Name = "servicemesh"

// Build is the service mesh service's app.Build: it needs the store only.
var Build = app.StoreBuild(Name, servicemesh.New)
