// Command cadist serves the CA distribution service's gRPC API on its own, for a
// Deployment per service.
package main

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/cadist"
)

func main() { app.Main(cadist.Name, true, cadist.Build) }
