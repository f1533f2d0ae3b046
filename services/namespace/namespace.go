// Package namespace is the namespace service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package namespace

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/namespace/internal/namespace"
)

// Name is the program name of the namespace service.
const Name = "namespace"

// Build is the namespace service's app.Build: it needs the store only.
var Build = app.StoreBuild(namespace.New)
