// Command quota serves the quota service's gRPC API on its own, for a
// Deployment per service.
package main

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/quota"
)

func main() { app.Main(quota.Name, true, quota.Build) }
