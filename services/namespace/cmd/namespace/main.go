// Command namespace serves the namespace service's gRPC API on its own, for a
// Deployment per service.
package main

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/namespace"
)

func main() { app.Main(namespace.Name, true, namespace.Build) }
