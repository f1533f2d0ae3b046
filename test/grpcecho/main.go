// Command grpcecho is the tests' proxyless gRPC workload (docs/mesh.md,
// "What is proven and what is not"): an echo server and client that take
// their routes, endpoints, mutual TLS and authorization from istiod through
// gRPC-Go's xds package, as Istio's grpc-agent injection template expects
// (GRPC_XDS_BOOTSTRAP names the bootstrap pilot-agent writes). It is a tools
// module outside the product's go.mod and go.work, built with GOWORK=off by
// make images into the image dcm.local/grpcecho:latest (docs/images.md).
// It is for tests only: nothing of DCM runs it.
//
//	grpcecho serve -port 8080
//	    an xds.NewGRPCServer with xDS server credentials (plaintext when
//	    istiod sends no TLS): each call is answered with the identity the
//	    server saw, "client=<spiffe id>" or "client=plaintext".
//	grpcecho call [-plaintext | -certs DIR] [-timeout 10s] TARGET
//	    one call to TARGET (xds:///<svc>.<ns>.svc.cluster.local:<port>, or any
//	    gRPC target) with xDS client credentials (insecure with -plaintext;
//	    with -certs, mutual TLS from the agent's files in DIR whatever istiod
//	    says: cert-chain.pem and key.pem presented, the server's chain
//	    verified to root-cert.pem, its name not checked);
//	    prints "OK server=<spiffe id or plaintext> <answer>" and exits 0, or
//	    "FAIL code=<gRPC code> message=<message>" and exits 1.
//	grpcecho cat FILE
//	    FILE's content on standard output (the image has no shell): a test
//	    reads the agent's certificates with it.
//	grpcecho idle
//	    nothing until SIGTERM: the main process of a client pod, in which a
//	    test runs grpcecho call with kubectl exec.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// method is the one RPC: a StringValue in, a StringValue out, so that no
// generated code is needed.
const method = "/dcm.test.grpcecho.Echo/Echo"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "call":
		err = call(os.Args[2:])
	case "cat":
		err = cat(os.Args[2:])
	case "idle":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		<-ctx.Done()
		stop()
	default:
		usage()
	}
	if err != nil {
		fmt.Println("FAIL", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: grpcecho serve -port N | grpcecho call [-plaintext | -certs DIR] [-timeout D] TARGET | grpcecho cat FILE | grpcecho idle")
	os.Exit(2)
}

// identity is the SPIFFE ID of the other side of a call, or "plaintext"
// when the connection carries no TLS.
func identity(p *peer.Peer) string {
	if p == nil || p.AuthInfo == nil {
		return "plaintext"
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		// The insecure credentials (xDS credentials fall back to them
		// when istiod sends no TLS) say "insecure".
		if p.AuthInfo.AuthType() == "insecure" {
			return "plaintext"
		}
		return "auth:" + p.AuthInfo.AuthType()
	}
	if len(ti.State.PeerCertificates) == 0 {
		return "tls-without-certificate"
	}
	leaf := ti.State.PeerCertificates[0]
	if len(leaf.URIs) == 0 {
		return "tls-subject:" + leaf.Subject.String()
	}
	return leaf.URIs[0].String()
}

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	port := fs.Int("port", 8080, "port to listen on (all addresses): the Service's target port")
	_ = fs.Parse(args)

	if err := waitForBootstrap(time.Minute); err != nil {
		return err
	}
	creds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: insecure.NewCredentials()})
	if err != nil {
		return fmt.Errorf("xds server credentials: %w", err)
	}
	srv, err := xds.NewGRPCServer(grpc.Creds(creds), xds.ServingModeCallback(func(addr net.Addr, a xds.ServingModeChangeArgs) {
		fmt.Printf("serving mode of %s: %s (%v)\n", addr, a.Mode, a.Err)
	}))
	if err != nil {
		return fmt.Errorf("xds server: %w", err)
	}
	register(srv)
	// Istio names the inbound listener after the address listened on
	// (xds.istio.io/grpc/lds/inbound/0.0.0.0:<port>) and finds the
	// workload's Service by that port.
	lis, err := net.Listen("tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(*port)))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	fmt.Printf("listening on %s\n", lis.Addr())
	if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// register adds the echo service to s.
func register(s grpc.ServiceRegistrar) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "dcm.test.grpcecho.Echo",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "Echo", Handler: echoHandler}},
	}, struct{}{})
}

// echoHandler decodes the request and runs echo through the server's
// interceptors: the xds server's RBAC (the AuthorizationPolicies istiod
// sends) is one, and a handler that does not call the interceptor it is
// given skips it (every call was allowed).
func echoHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(wrapperspb.StringValue)
	if err := dec(in); err != nil {
		return nil, err
	}
	if interceptor == nil {
		return echo(ctx, in)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: method}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return echo(ctx, req.(*wrapperspb.StringValue))
	})
}

// echo answers with the identity the server saw.
func echo(ctx context.Context, in *wrapperspb.StringValue) (any, error) {
	p, _ := peer.FromContext(ctx)
	who := identity(p)
	fmt.Printf("call from %s: %q\n", who, in.GetValue())
	return wrapperspb.String("client=" + who + " echo=" + in.GetValue()), nil
}

// waitForBootstrap waits until the file GRPC_XDS_BOOTSTRAP names exists,
// for at most d: the injector puts the application container before
// pilot-agent, so the kubelet may start the server before the agent has
// written the bootstrap (it would exit, and restart with a back-off).
func waitForBootstrap(d time.Duration) error {
	file := os.Getenv("GRPC_XDS_BOOTSTRAP")
	if file == "" {
		return nil
	}
	deadline := time.Now().Add(d)
	for {
		_, err := os.Stat(file)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no xDS bootstrap after %s: %w", d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func call(args []string) error {
	fs := flag.NewFlagSet("call", flag.ExitOnError)
	plaintext := fs.Bool("plaintext", false, "no TLS at all, whatever istiod says (insecure credentials)")
	certs := fs.String("certs", "", "mutual TLS from the agent's files in this directory (cert-chain.pem, key.pem, root-cert.pem), not from xDS")
	timeout := fs.Duration("timeout", 10*time.Second, "deadline of the call, connecting included")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		usage()
	}
	target := fs.Arg(0)
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	switch {
	case *certs != "":
		tc, err := filesTLS(*certs)
		if err != nil {
			return fmt.Errorf("code=InvalidArgument message=%q", err.Error())
		}
		creds = credentials.NewTLS(tc)
	case !*plaintext:
		var err error
		creds, err = xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()})
		if err != nil {
			return fmt.Errorf("xds client credentials: %w", err)
		}
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("code=InvalidArgument message=%q", err.Error())
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var p peer.Peer
	out := new(wrapperspb.StringValue)
	if err := conn.Invoke(ctx, method, wrapperspb.String("hello"), out, grpc.Peer(&p)); err != nil {
		st := status.Convert(err)
		return fmt.Errorf("code=%s message=%q", st.Code(), st.Message())
	}
	fmt.Printf("OK server=%s %s\n", identity(&p), out.GetValue())
	return nil
}

// filesTLS is a client's mutual TLS from the files pilot-agent writes for
// proxyless gRPC in dir: its certificate chain and key, and the server's
// chain verified to the roots of root-cert.pem. The server's name is not
// checked (its certificate names a SPIFFE ID, no host): a test calls a
// workload of another logical cloud with the certificate of its own.
func filesTLS(dir string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert-chain.pem"), filepath.Join(dir, "key.pem"))
	if err != nil {
		return nil, err
	}
	pemRoots, err := os.ReadFile(filepath.Join(dir, "root-cert.pem"))
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemRoots) {
		return nil, fmt.Errorf("no certificate in %s", filepath.Join(dir, "root-cert.pem"))
	}
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		MinVersion:   tls.VersionTLS12,
		// The chain is verified below, without a host name.
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyPeerCertificate
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("the server sent no certificate")
			}
			chain := make([]*x509.Certificate, len(raw))
			for i, der := range raw {
				c, err := x509.ParseCertificate(der)
				if err != nil {
					return err
				}
				chain[i] = c
			}
			inter := x509.NewCertPool()
			for _, c := range chain[1:] {
				inter.AddCert(c)
			}
			_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
			return err
		},
	}, nil
}

func cat(args []string) error {
	if len(args) != 1 {
		usage()
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(b)
	return err
}
