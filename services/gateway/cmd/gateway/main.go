// Command gateway serves the REST API, translating it into gRPC calls to the
// services at DCM_<SERVICE>_ADDR.
package main

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/gateway"
)

func main() { app.Main(gateway.Name, false, gateway.Build) }
