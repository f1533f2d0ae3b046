// Package user is the user service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package user

import (
	"google.golang.org/grpc"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/user/internal/user"
)

// Name is the program name of the user service.
const Name = "user"

// Build is the user service's app.Build: the store, and core to ask
// whether a logical cloud exists.
var Build = app.PeerBuild(func(c *server.Config) string { return c.CoreAddr },
	func(st *store.Store, conn *grpc.ClientConn) *user.Service {
		return user.New(st, corev1.NewLogicalCloudServiceClient(conn))
	})
