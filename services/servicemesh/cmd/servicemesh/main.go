// Command servicemesh serves the service mesh service's gRPC API on its own, for a
// Deployment per service.
package main

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/servicemesh"
)

func main() { app.Main(servicemesh.Name, true, servicemesh.Build) }
