package client

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// UnsentWait is how long a unary call that found no connected address of
// its peer, and so was never sent, waits for one before it fails.
//
// A rolling restart of a Deployment of 2 replicas behind a headless
// Service takes both old pods out of its name within seconds; they stop
// together at the end of their preStop pause. A client that had not
// looked the name up meanwhile (it does when a connection fails) then
// holds only addresses where nothing listens: until its next lookup (at
// most MinResolutionInterval later) and a connection to a new pod, calls
// failed at once (Unavailable, "connection refused":
// TestStoreServerOverlayRollingRestarts in deploy/test, one call in a
// run). Such a call now waits that moment out and is sent once; a peer
// that is really down answers Unavailable after UnsentWait.
const UnsentWait = 3 * time.Second

// waitUnsent is the unary interceptor of UnsentWait. Only a call that
// never left this process is sent again (gRPC tells a call its peer only
// once it had a stream to one), so nothing is done twice.
func waitUnsent(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var p peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Peer(&p))...)
	if err == nil || p.Addr != nil || status.Code(err) != codes.Unavailable || ctx.Err() != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, UnsentWait)
	defer cancel()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if s == connectivity.Idle {
			cc.Connect()
		}
		if !cc.WaitForStateChange(wait, s) {
			return err // still no peer: the first answer says why
		}
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}
