// Package rsync is the resource synchronizer service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package rsync

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/rsync/internal/rsync"
)

// Name is the program name of the resource synchronizer service.
const Name = "rsync"

// Build is the resource synchronizer service's app.Build: it needs the store only.
var Build = app.StoreBuild(rsync.New)
