// Package rsync is the resource synchronizer service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package rsync

import (
	"google.golang.org/grpc"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/rsync"
)

// Name is the program name of the resource synchronizer service.
const Name = "rsync"

// Build is the resource synchronizer's app.Build: the store, and core to
// ask which logical clouds reference a cluster.
var Build = app.PeerBuild(func(c *server.Config) string { return c.CoreAddr },
	func(st *store.Store, conn *grpc.ClientConn) *rsync.Service {
		return rsync.New(st, corev1.NewLogicalCloudServiceClient(conn))
	})
