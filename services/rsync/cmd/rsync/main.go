// Command rsync serves the resource synchronizer service's gRPC API on its own, for a
// Deployment per service.
package main

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/rsync"
)

func main() { app.Main(rsync.Name, true, rsync.Build) }
