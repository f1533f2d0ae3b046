// Package user is the user service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package user

import (
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/user/internal/user"
)

// Name is the program name of the user service.
const Name = "user"

// Build is the user service's app.Build: it needs the store only.
var Build = app.StoreBuild(user.New)
