// Command user serves the user service's gRPC API on its own, for a
// Deployment per service.
package main

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/user"
)

func main() { app.Main(user.Name, true, user.Build) }
