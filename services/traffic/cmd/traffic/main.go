// Command traffic serves the traffic controller service's gRPC API on its own, for a
// Deployment per service.
package main

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/traffic"
)

func main() { app.Main(traffic.Name, true, traffic.Build) }
