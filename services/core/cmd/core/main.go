// Command core serves the core service's gRPC API on its own, for a
// Deployment per service.
package main

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/core"
)

func main() { app.Main(core.Name, true, core.Build) }
