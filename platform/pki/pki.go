// Package pki is DCM's certificate plumbing: a local CA and the certificates
// it issues, written once under the data dir on first start (the
// all-in-one default), or PEM files at configured paths (production, e.g.
// mounted cert-manager secrets); TLS configurations for the gRPC and HTTP
// servers and for clients; and the caller identity a client certificate
// carries.
//
// A certificate's identity: the subject common name is who the caller is,
// its first organization is its role and its first organizational unit the
// project its role is scoped to (none: global). Services carry the role
// "service".
//
// It must not know about any service, and never logs key material.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"time"
)

// Roles a caller can have.
const (
	RoleAdmin        = "admin"
	RoleProjectAdmin = "project-admin"
	RoleReader       = "reader"
	// RoleService is a DCM service calling another one.
	RoleService = "service"
)

// CallerPrefix starts the gRPC metadata keys with which the gateway tells
// the services which REST caller a call acts for (platform/server.Caller).
const CallerPrefix = "dcm-caller-"

// Identity is an authenticated caller.
type Identity struct {
	Subject string
	Role    string
	// Project scopes the role; empty is global.
	Project string
	// Method is how the caller proved it: "certificate" or "token".
	Method string
}

// IdentityOf reads the identity a client certificate carries.
func IdentityOf(c *x509.Certificate) Identity {
	id := Identity{Subject: c.Subject.CommonName, Method: "certificate"}
	if len(c.Subject.Organization) > 0 {
		id.Role = c.Subject.Organization[0]
	}
	if len(c.Subject.OrganizationalUnit) > 0 {
		id.Project = c.Subject.OrganizationalUnit[0]
	}
	return id
}

// CA is a certificate authority that can issue.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed CA valid for validity.
func NewCA(name string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"dcm"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LoadCA reads a CA certificate and its key from PEM files.
func LoadCA(certFile, keyFile string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load CA %s: %w", certFile, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("load CA %s: key is not ECDSA", certFile)
	}
	return &CA{Cert: pair.Leaf, Key: key}, nil
}

// Request describes a certificate to issue.
type Request struct {
	Identity Identity
	// Hosts are DNS names or IP addresses the certificate serves (server use).
	Hosts []string
	// Server and Client select the extended key usages.
	Server, Client bool
	// NotBefore and NotAfter bound validity; zero NotBefore is now.
	NotBefore, NotAfter time.Time
}

// Issue signs a new key pair for r and returns both as PEM.
func (ca *CA) Issue(r Request) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if r.NotBefore.IsZero() {
		r.NotBefore = time.Now().Add(-time.Minute)
	}
	name := pkix.Name{CommonName: r.Identity.Subject}
	if r.Identity.Role != "" {
		name.Organization = []string{r.Identity.Role}
	}
	if r.Identity.Project != "" {
		name.OrganizationalUnit = []string{r.Identity.Project}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      name,
		NotBefore:    r.NotBefore,
		NotAfter:     r.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if r.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if r.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	for _, h := range r.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = KeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return CertPEM(der), keyPEM, nil
}

// CertPEM encodes a DER certificate.
func CertPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// KeyPEM encodes a private key as PKCS #8.
func KeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// Files are the PEM files a program's TLS comes from.
type Files struct {
	// CA is the bundle that client and server certificates must chain to.
	CA string
	// Cert and Key are this program's own certificate (server and client use).
	Cert, Key string
}

// TLS is a program's loaded TLS material.
type TLS struct {
	pool *x509.CertPool
	cert tls.Certificate
}

// Load reads f.
func Load(f Files) (*TLS, error) {
	caPEM, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("read CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("load certificate %s: %w", f.Cert, err)
	}
	return &TLS{pool: pool, cert: cert}, nil
}

// Pool is the CA bundle.
func (t *TLS) Pool() *x509.CertPool { return t.pool }

// GRPCServer is the gRPC server's configuration: every caller presents a
// client certificate that chains to the CA bundle.
func (t *TLS) GRPCServer() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{t.cert},
		ClientCAs:    t.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
}

// HTTPServer is the HTTPS server's configuration. A client certificate is
// asked for but not checked in the handshake: VerifyClient checks it, so
// that a bad one gets an HTTP 401 rather than a TLS alert, and callers
// with a bearer token need none.
func (t *TLS) HTTPServer() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{t.cert},
		ClientAuth:   tls.RequestClientCert,
	}
}

// Client is the configuration for dialing another DCM program: it checks
// the server against the CA bundle and presents this program's certificate.
func (t *TLS) Client() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		RootCAs:      t.pool,
		Certificates: []tls.Certificate{t.cert},
	}
}

// ErrBadCertificate is every reason a client certificate is refused; the
// detail is for the server's log only.
var ErrBadCertificate = errors.New("client certificate not accepted")

// VerifyClient checks a client's certificate chain (leaf first) against
// the CA bundle, for client use, at the current time.
func (t *TLS) VerifyClient(chain []*x509.Certificate) (Identity, error) {
	if len(chain) == 0 {
		return Identity{}, fmt.Errorf("%w: none presented", ErrBadCertificate)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         t.pool,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrBadCertificate, err)
	}
	return IdentityOf(chain[0]), nil
}
