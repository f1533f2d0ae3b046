// Package namespace is the namespace service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package namespace

import (
	"google.golang.org/grpc"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/namespace/internal/namespace"
)

// Name is the program name of the namespace service.
const Name = "namespace"

// Build is the namespace service's app.Build: the store, and core to ask
// whether a logical cloud exists.
var Build = app.PeerBuild(func(c *server.Config) string { return c.CoreAddr },
	func(st *store.Store, conn *grpc.ClientConn) *namespace.Service {
		return namespace.New(st, corev1.NewLogicalCloudServiceClient(conn))
	})
