package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/test/bufconn"

	"github.com/dcm-project/dcm/platform/pki"
)

// inProcessBuffer is each direction's buffer of an in-process connection.
const inProcessBuffer = 1 << 20

// InProcess lets a program's services call the gRPC services the same
// program serves without leaving the process: no socket, no TLS. The
// all-in-one program serves every service and dials itself for each call
// between them; with InProcess those calls go through the same gRPC
// server, interceptors and generated clients, over an in-memory
// connection. Programs that call other programs keep mutual TLS.
//
// The server sees an in-process caller as the holder of the program's own
// certificate, exactly as it would over mutual TLS (the program dials
// with that certificate): the interceptors read the same verified chain,
// so the caller's service name and the service-CA check are unchanged.
// Only this process can open such a connection.
type InProcess struct {
	ln   *bufconn.Listener
	info credentials.TLSInfo
}

// NewInProcess prepares in-process connections for a program whose own
// certificate is t's. The chain is checked as a TLS handshake would check
// a caller's (VerifyClient: the CA bundle, client use, the service CA).
func NewInProcess(t *pki.TLS) (*InProcess, error) {
	if t == nil {
		return nil, errors.New("in-process gRPC: no certificate to call with")
	}
	certs := t.Client().Certificates
	if len(certs) == 0 {
		return nil, errors.New("in-process gRPC: no certificate to call with")
	}
	var chain []*x509.Certificate
	for _, der := range certs[0].Certificate {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("in-process gRPC: own certificate: %w", err)
		}
		chain = append(chain, c)
	}
	if _, err := t.VerifyClient(chain); err != nil {
		return nil, fmt.Errorf("in-process gRPC: own certificate would be refused: %w", err)
	}
	state := tls.ConnectionState{HandshakeComplete: true, PeerCertificates: chain, VerifiedChains: [][]*x509.Certificate{chain}}
	return &InProcess{
		ln:   bufconn.Listen(inProcessBuffer),
		info: credentials.TLSInfo{State: state, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}},
	}, nil
}

// Dial opens an in-process connection to the program's gRPC server (a
// grpc.WithContextDialer dialer; the address is ignored).
func (p *InProcess) Dial(ctx context.Context, _ string) (net.Conn, error) {
	c, err := p.ln.DialContext(ctx)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Close ends the in-process listener: dials fail at once (a program that
// ends up serving no gRPC closes it).
func (p *InProcess) Close() { _ = p.ln.Close() }

// listener is what the gRPC server accepts in-process connections from:
// each is marked, so that only those skip the TLS handshake.
func (p *InProcess) listener() net.Listener { return markingListener{p.ln} }

type markingListener struct{ net.Listener }

func (l markingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &inProcessConn{c}, nil
}

// inProcessConn is a connection accepted from the in-process listener: no
// other connection has this type.
type inProcessConn struct{ net.Conn }

// creds wraps the server's transport credentials: an in-process
// connection is the program itself (its own verified chain), any other
// goes through next (mutual TLS).
func (p *InProcess) creds(next credentials.TransportCredentials) credentials.TransportCredentials {
	return inProcessCreds{TransportCredentials: next, info: p.info}
}

type inProcessCreds struct {
	credentials.TransportCredentials
	info credentials.TLSInfo
}

func (c inProcessCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if _, ok := conn.(*inProcessConn); ok {
		return conn, c.info, nil
	}
	return c.TransportCredentials.ServerHandshake(conn)
}

func (c inProcessCreds) Clone() credentials.TransportCredentials {
	return inProcessCreds{TransportCredentials: c.TransportCredentials.Clone(), info: c.info}
}

// serveInProcess serves s's gRPC server on the in-process listener until
// the server stops.
func serveInProcess(s *grpc.Server, p *InProcess) error {
	if err := s.Serve(p.listener()); !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}
