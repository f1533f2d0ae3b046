// Package core is the core service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package core

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/core/internal/core"
)

// Name is the program name of the core service.
const Name = "core"

// Build is the core service's app.Build: it needs the store only.
var Build = app.StoreBuild(core.New)
