// Package client dials other DCM services over gRPC with the options every
// caller needs: mutual TLS, tracing and request-id propagation. It must not
// know about any service's API.
package client

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/dns"
	"google.golang.org/grpc/resolver/manual"

	"github.com/dcm-project/dcm/platform/pki"
)

// MaxRecvMsgSize is the largest response a DCM client takes from a peer,
// in bytes (gRPC's default is 4 MiB): the peers are DCM's own services, and
// a render's answer grows with a logical cloud's clusters (the service
// mesh's control planes, Istio's CRDs: docs/rsync.md, "Message sizes").
// The resource synchronizer's server takes requests of this size too.
const MaxRecvMsgSize = 64 << 20

// MinResolutionInterval is how soon a client may look its peers' name up
// again (gRPC's DNS resolver waits 30 s by default). A client re-resolves
// when a peer's connection fails; a rolling restart replaces every replica
// of a headless Service in a few seconds, so with 30 s a client held only
// the addresses of pods that had gone, and every call failed (Unavailable,
// "connection refused": TestStoreServerOverlayRollingRestarts in
// deploy/test) until its next lookup.
const MinResolutionInterval = time.Second

func init() {
	// gRPC asks for it at startup, before any channel: this package's
	// init runs before any program dials through it.
	dns.SetMinResolutionInterval(MinResolutionInterval)
}

// Dial returns a lazily connecting client for addr, over mutual TLS with
// t, or in plaintext when t is nil (only where DCM_INSECURE_GRPC allows it).
//
// Calls are spread round robin over every address addr resolves to (a
// Kubernetes headless Service's name resolves to each ready replica), and
// go to the others while one is down. addr may also list replicas,
// comma-separated ("core-0:9090,core-1:9090"), each verified under its
// own host name.
func Dial(addr string, t *pki.TLS) (*grpc.ClientConn, error) {
	if t == nil {
		return DialInsecure(addr, "")
	}
	return dial(addr, credentials.NewTLS(t.Client()))
}

// DialInsecure returns a plaintext client for addr (only where
// DCM_INSECURE_GRPC allows it) whose calls name the dialing program
// (pki.InsecureProgramKey) for the server's allow-list: program is the
// name a certificate would carry ("core", "gateway", pki.AllInOne). An
// empty program names none: the server then serves it only what it serves
// every peer (health, reflection).
func DialInsecure(addr, program string) (*grpc.ClientConn, error) {
	var opts []grpc.DialOption
	if program != "" {
		name := func(ctx context.Context) context.Context {
			return metadata.AppendToOutgoingContext(ctx, pki.InsecureProgramKey, program)
		}
		opts = append(opts,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, o ...grpc.CallOption) error {
				return invoker(name(ctx), method, req, reply, cc, o...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, o ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(name(ctx), desc, cc, method, o...)
			}))
	}
	return dial(addr, insecure.NewCredentials(), opts...)
}

func dial(addr string, creds credentials.TransportCredentials, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	target, opts, err := targetOf(addr)
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`),
		// A peer that was down is retried soon after it is back: calls
		// fail (Unavailable) while the connection is backing off, after
		// UnsentWait (waitUnsent).
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxRecvMsgSize)),
		grpc.WithChainUnaryInterceptor(propagateUnary, waitUnsent),
		grpc.WithChainStreamInterceptor(propagateStream),
	)
	conn, err := grpc.NewClient(target, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}

// peersScheme is the resolver scheme of a list of peer addresses.
const peersScheme = "dcm-peers"

// targetOf is the gRPC target of addr and the options it needs: addr
// itself for one address; for a list, a resolver that answers the list
// (each address keeping its host as the TLS server name).
func targetOf(addr string) (string, []grpc.DialOption, error) {
	if !strings.Contains(addr, ",") {
		return addr, nil, nil
	}
	var addrs []resolver.Address
	for a := range strings.SplitSeq(addr, ",") {
		a = strings.TrimSpace(a)
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return "", nil, fmt.Errorf("dial %s: address %q of the list: %w", addr, a, err)
		}
		addrs = append(addrs, resolver.Address{Addr: a, ServerName: host})
	}
	r := manual.NewBuilderWithScheme(peersScheme)
	r.InitialState(resolver.State{Addresses: addrs})
	return peersScheme + ":///" + addrs[0].Addr, []grpc.DialOption{grpc.WithResolvers(r)}, nil
}

const requestID = "x-request-id"

// outgoing copies the caller's request id and the REST caller it acts for
// (pki.CallerPrefix keys) onto a call to another service.
func outgoing(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ctx
	}
	var kv []string
	if v := md.Get(requestID); len(v) > 0 {
		kv = append(kv, requestID, v[0])
	}
	for k, v := range md {
		if strings.HasPrefix(k, pki.CallerPrefix) && len(v) > 0 {
			kv = append(kv, k, v[len(v)-1])
		}
	}
	if len(kv) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

func propagateUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(outgoing(ctx), method, req, reply, cc, opts...)
}

func propagateStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(outgoing(ctx), desc, cc, method, opts...)
}
