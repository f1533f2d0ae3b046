package client

import (
	"context"
	"fmt"
	"net"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// DialInProcess returns a client of this program's own gRPC server over
// in-memory connections that dial opens (platform/server.InProcess): the
// calls one service of a program makes to another it serves. No TLS: the
// connection never leaves the process, and the server knows it for the
// program's own (its certificate's identity, as over mutual TLS). The
// calls carry what Dial's carry (request id, the REST caller) and take
// answers of the same size.
func DialInProcess(dial func(context.Context, string) (net.Conn, error)) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("passthrough:///in-process",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxRecvMsgSize)),
		grpc.WithChainUnaryInterceptor(propagateUnary),
		grpc.WithChainStreamInterceptor(propagateStream),
	)
	if err != nil {
		return nil, fmt.Errorf("dial in-process: %w", err)
	}
	return conn, nil
}
