// Package traffic is the traffic controller service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package traffic

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/traffic/internal/traffic"
)

// Name is the program name of the traffic controller service.
const Name = "traffic"

// Build is the traffic controller service's app.Build: it needs the store only.
var Build = app.StoreBuild(Name, traffic.New)
