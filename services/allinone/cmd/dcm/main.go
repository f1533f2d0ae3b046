// Command dcm runs the whole Distributed Cloud Manager in one process on the
// embedded store: `make run`.
package main

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/allinone"
)

func main() { app.Main(allinone.Name, true, allinone.Build) }
