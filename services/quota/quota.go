// Package quota is the quota service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package quota

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/quota/internal/quota"
)

// Name is the program name of the quota service.
const Name = "quota"

// Build is the quota service's app.Build: it needs the store only.
var Build = app.StoreBuild(quota.New)
