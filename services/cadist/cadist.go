// Package cadist is the CA distribution service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package cadist

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/cadist/internal/cadist"
)

// Name is the program name of the CA distribution service.
const Name = "cadist"

// Build is the CA distribution service's app.Build: it needs the store only.
var Build = app.StoreBuild(Name, cadist.New)
