// Package pki is DCM's certificate plumbing: a local CA and the certificates
// it issues, written once under the data dir on first start (the
// all-in-one default), or PEM files at configured paths (production, e.g.
// mounted cert-manager secrets); TLS configurations for the gRPC and HTTP
// servers and for clients; and the caller identity a client certificate
// carries.
//
// A certificate's identity: the subject common name is who the caller is,
// its first organization is its role and its first organizational unit the
// project its role is scoped to (none: global). DCM's programs carry the
// role "service" and their program's name (AllInOne for the all-in-one
// program), from the service CA only (TLS.ServiceIssued); a public HTTPS
// listener serves a certificate that is no client one (HTTPServingError).
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
	"strings"
	"sync"
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

// InsecureProgramKey is the gRPC metadata key with which a program names
// itself on plaintext gRPC (DCM_INSECURE_GRPC), where no certificate does:
// the server checks the method's allow-list against that name
// (platform/server). It is a claim, not a proof: any process that reaches
// the loopback address can make it.
const InsecureProgramKey = "dcm-insecure-program"

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

// NewCA makes a self-signed CA valid for validity. It signs end entities
// only (path length 0).
func NewCA(name string, validity time.Duration) (*CA, error) { return newCA(name, validity, 0) }

// NewRootCA makes a self-signed CA like NewCA that may also sign
// intermediate CAs: up to pathLen CAs may stand between it and an end
// entity (a service mesh root signs intermediates that sign workloads).
func NewRootCA(name string, validity time.Duration, pathLen int) (*CA, error) {
	return newCA(name, validity, pathLen)
}

func newCA(name string, validity time.Duration, pathLen int) (*CA, error) {
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
		MaxPathLen:            pathLen,
		MaxPathLenZero:        pathLen == 0,
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

// ParseCertificates reads PEM text that holds CERTIFICATE blocks and
// nothing else (blank text: none). Its errors never quote the text: what was
// sent may be a key in the wrong field.
func ParseCertificates(text string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := []byte(text)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, errors.New("holds a PEM block that is not a CERTIFICATE")
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("not an X.509 certificate: %w", err)
		}
		out = append(out, c)
	}
	switch {
	case strings.TrimSpace(string(rest)) == "":
		return out, nil
	case len(out) == 0:
		return nil, errors.New("is not PEM: must be PEM CERTIFICATE blocks")
	}
	return nil, errors.New("has text after its certificates that is not PEM")
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
	// ServiceCA, when set, is the bundle that certificates with the role
	// service must chain to (the installation's service CA), clients' and
	// the servers a program dials. Empty: the roots of CA that Cert chains
	// to, i.e. the CA that issued this program's own certificate (all of
	// CA when Cert is not a program's).
	ServiceCA string
	// HTTPCert and HTTPKey, when set, are the certificate the HTTPS
	// listener serves instead of Cert (server use only: see HTTPServingError).
	HTTPCert, HTTPKey string
}

// TLS is a program's loaded TLS material.
type TLS struct {
	pool *x509.CertPool
	// services is the pool a certificate with the role service must chain to.
	services *x509.CertPool
	cert     tls.Certificate
	// http is what the HTTPS listener serves (cert unless configured).
	http tls.Certificate
	// serviceOK caches the service certificates (by their DER) that chain
	// to services, so that calls between services verify once per peer.
	mu        sync.Mutex
	serviceOK map[string]bool
}

// Load reads f.
func Load(f Files) (*TLS, error) {
	pool, err := readPool(f.CA, "CA bundle")
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("load certificate %s: %w", f.Cert, err)
	}
	t := &TLS{pool: pool, cert: cert, http: cert, serviceOK: map[string]bool{}}
	if f.HTTPCert != "" || f.HTTPKey != "" {
		if t.http, err = tls.LoadX509KeyPair(f.HTTPCert, f.HTTPKey); err != nil {
			return nil, fmt.Errorf("load HTTPS certificate %s: %w", f.HTTPCert, err)
		}
	}
	if f.ServiceCA != "" {
		if t.services, err = readPool(f.ServiceCA, "service CA bundle"); err != nil {
			return nil, err
		}
		return t, nil
	}
	// The service CA defaults to what issued this program's own
	// certificate: the roots of the bundle its chains end at (none if it
	// chains to none: then no service certificate is accepted, and
	// OwnServiceError says why). Material that is not a program's (an
	// operator's, a test's) trusts the whole bundle.
	if IdentityOf(cert.Leaf).Role != RoleService {
		t.services = pool
		return t, nil
	}
	chains, _ := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: intermediates(cert), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	t.services = x509.NewCertPool()
	for _, c := range chains {
		t.services.AddCert(c[len(c)-1])
	}
	return t, nil
}

func readPool(file, what string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s %s holds no PEM certificate", what, file)
	}
	return pool, nil
}

func intermediates(c tls.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, der := range c.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			p.AddCert(ic)
		}
	}
	return p
}

// Identity is who this program's own certificate says it is.
func (t *TLS) Identity() Identity { return IdentityOf(t.cert.Leaf) }

// OwnServiceError says why this program's own certificate would be
// refused by its peers as a service identity: not the role service, no
// client use, or not issued by the service CA. Nil: it would not.
func (t *TLS) OwnServiceError() error {
	if id := t.Identity(); id.Role != RoleService || id.Project != "" {
		return fmt.Errorf("its organization is %q (and unit %q): a program's certificate has the organization %q and no unit", id.Role, id.Project, RoleService)
	}
	leaf := t.cert.Leaf
	chain := []*x509.Certificate{leaf}
	for _, der := range t.cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			chain = append(chain, c)
		}
	}
	if _, err := t.VerifyClient(chain); err != nil {
		return fmt.Errorf("it is not a client certificate of the service CA: %w", err)
	}
	return nil
}

// HTTPServingError says why the certificate the HTTPS listener serves
// must not be a public server's: it can also authenticate as a client
// (client-auth or any extended key usage, or none, which Go and most TLS
// stacks read as any) or it carries the role service. Whoever holds a
// public listener's key (a load balancer, an ingress) must not thereby
// hold a DCM identity. Nil: it is fit.
func (t *TLS) HTTPServingError() error {
	leaf := t.http.Leaf
	if IdentityOf(leaf).Role == RoleService {
		return fmt.Errorf("its organization is %q", RoleService)
	}
	if len(leaf.ExtKeyUsage) == 0 && len(leaf.UnknownExtKeyUsage) == 0 {
		return errors.New("it has no extended key usage, so it is valid for client authentication too")
	}
	for _, u := range leaf.ExtKeyUsage {
		if u == x509.ExtKeyUsageClientAuth || u == x509.ExtKeyUsageAny {
			return errors.New("it has the client-auth extended key usage")
		}
	}
	return nil
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

// HTTPServer is the HTTPS server's configuration, serving Files.HTTPCert
// when it is set (else the program's own). A client certificate is
// asked for but not checked in the handshake: VerifyClient checks it, so
// that a bad one gets an HTTP 401 rather than a TLS alert, and callers
// with a bearer token need none.
func (t *TLS) HTTPServer() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{t.http},
		ClientAuth:   tls.RequestClientCert,
	}
}

// Client is the configuration for dialing another DCM program: it checks
// the server against the service CA (a program serves with its service
// certificate) and presents this program's certificate.
func (t *TLS) Client() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		RootCAs:      t.services,
		Certificates: []tls.Certificate{t.cert},
	}
}

// ErrBadCertificate is every reason a client certificate is refused; the
// detail is for the server's log only.
var ErrBadCertificate = errors.New("client certificate not accepted")

// VerifyClient checks a client's certificate chain (leaf first) against
// the CA bundle, for client use, at the current time; a certificate with
// the role service must moreover chain to the service CA (ServiceIssued).
func (t *TLS) VerifyClient(chain []*x509.Certificate) (Identity, error) {
	if err := verifyClientChain(chain, t.pool); err != nil {
		return Identity{}, err
	}
	id := IdentityOf(chain[0])
	if id.Role == RoleService {
		if err := t.ServiceIssued(chain); err != nil {
			return Identity{}, err
		}
	}
	return id, nil
}

// ServiceIssued checks that a client certificate chain (leaf first, the
// rest intermediates) chains to the service CA: the role service is
// believed only from the installation's service CA, not from any CA of
// the bundle (one that also issues admins' or tenants' certificates, or
// another installation's). Successes are remembered.
func (t *TLS) ServiceIssued(chain []*x509.Certificate) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: none presented", ErrBadCertificate)
	}
	key := string(chain[0].Raw)
	t.mu.Lock()
	ok := t.serviceOK[key]
	t.mu.Unlock()
	if ok {
		return nil
	}
	if err := verifyClientChain(chain, t.services); err != nil {
		return fmt.Errorf("role %s from a CA other than the service CA: %w", RoleService, err)
	}
	t.mu.Lock()
	if len(t.serviceOK) >= maxServiceCache {
		clear(t.serviceOK)
	}
	t.serviceOK[key] = true
	t.mu.Unlock()
	return nil
}

// verifyClientChain checks a chain (leaf first, then intermediates)
// against roots, for client use, at the current time.
func verifyClientChain(chain []*x509.Certificate, roots *x509.CertPool) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: none presented", ErrBadCertificate)
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadCertificate, err)
	}
	return nil
}

// maxServiceCache bounds ServiceIssued's memory: an installation has a
// few service certificates per program, renewed now and then.
const maxServiceCache = 1024
