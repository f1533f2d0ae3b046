package cadist

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/dcm-project/dcm/platform/pki"
)

// Key types a root can be generated with.
const (
	KeyECDSAP256 = "ecdsa-p256"
	KeyRSA4096   = "rsa-4096"
)

// minRSABits is the smallest RSA key a root may have.
const minRSABits = 2048

// newKey makes a private key of kind (KeyECDSAP256 or KeyRSA4096).
func newKey(kind string) (crypto.Signer, error) {
	switch kind {
	case KeyECDSAP256, "":
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case KeyRSA4096:
		return rsa.GenerateKey(rand.Reader, 4096)
	}
	return nil, fmt.Errorf("unknown key type %q", kind)
}

// keyTypeOf names a public key's kind as Root.key_type does.
func keyTypeOf(pub any) string {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return "ecdsa-" + strings.ToLower(strings.ReplaceAll(k.Curve.Params().Name, "-", ""))
	case *rsa.PublicKey:
		return fmt.Sprintf("rsa-%d", k.N.BitLen())
	}
	return fmt.Sprintf("%T", pub)
}

// randomSerial is a positive 127-bit serial number: unique with
// overwhelming probability (RFC 5280 asks for at most 20 octets).
func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	return n.Add(n, big.NewInt(1)), nil
}

// selfSignedRoot makes a root CA certificate for key, valid from now for
// validity. Its path length is unbounded below it: it signs intermediates
// that sign workload certificates. No extended key usage (Istio verifies
// its chain for serverAuth, which an EKU-less CA allows).
func selfSignedRoot(name string, key crypto.Signer, now time.Time, validity time.Duration) (*x509.Certificate, error) {
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"dcm"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            1,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// intermediateSpec is what an intermediate CA certificate is made for.
type intermediateSpec struct {
	project, logicalCloud, provider, cluster string
	trustDomain                              string
	// dnsDomains are the DNS names (and their subdomains) it may sign
	// for: dnsDomains of the logical cloud's namespaces.
	dnsDomains          []string
	notBefore, notAfter time.Time
}

// dnsDomains are the DNS name constraints of an intermediate for a logical
// cloud's namespaces: each namespace's service names, <ns>.svc and
// <ns>.svc.cluster.local, sorted. istiod's serving certificate (the names
// of its Service, istiod[-<rev>].<istio namespace>.svc) falls under the
// Istio namespace's; workload certificates carry SPIFFE URIs only.
func dnsDomains(namespaces []string) []string {
	out := make([]string, 0, 2*len(namespaces))
	for _, ns := range namespaces {
		out = append(out, ns+".svc", ns+".svc.cluster.local")
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// signIntermediate makes a key and an intermediate CA certificate for it,
// signed by the root: path length 0 (it signs workloads only), no
// extended key usage, and a critical name constraint permitting URIs in
// the trust domain only (spiffe://<trust domain>/...) and DNS names under
// the logical cloud's namespaces only (spec.dnsDomains: istiod's own
// serving certificate has DNS names, docs/mesh.md section 4), so a leaked
// intermediate signs no serving certificate for another tenant's or the
// cluster's services.
func signIntermediate(spec intermediateSpec, root *x509.Certificate, rootKey crypto.Signer) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		// Each name is a DNS label (at most 63 characters), within the
		// 64 an X.520 attribute may hold.
		Subject: pkix.Name{
			Organization:       []string{"dcm"},
			OrganizationalUnit: []string{spec.project, spec.logicalCloud, spec.provider},
			CommonName:         spec.cluster,
		},
		NotBefore:                   spec.notBefore,
		NotAfter:                    spec.notAfter,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLen:                  0,
		MaxPathLenZero:              true,
		PermittedURIDomains:         []string{spec.trustDomain},
		PermittedDNSDomains:         spec.dnsDomains,
		PermittedDNSDomainsCritical: true, // marks the whole name constraints extension critical
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, root, &key.PublicKey, rootKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// trustDomainRE is an Istio trust domain as a URI name constraint takes
// it: a lowercase DNS name.
var trustDomainRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func checkTrustDomain(td string) error {
	if len(td) > 253 || !trustDomainRE.MatchString(td) {
		return errors.New("must be a lowercase DNS name (letters, digits, '-' and '.'), e.g. lc1.p1.dcm.local")
	}
	return nil
}

// parseKey reads a PEM private key (PKCS #8, PKCS #1 or SEC 1).
func parseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil || !strings.Contains(block.Type, "PRIVATE KEY") {
		return nil, errors.New("not a PEM private key")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
		return nil, fmt.Errorf("unsupported key %T", k)
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return nil, errors.New("not a PKCS #8, SEC 1 or PKCS #1 private key")
}

// keyPEM encodes a private key as PKCS #8.
func keyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func certPEM(c *x509.Certificate) string {
	return string(pki.CertPEM(c.Raw))
}

// parseCerts reads PEM certificates, nothing but CERTIFICATE blocks.
func parseCerts(text string) ([]*x509.Certificate, error) {
	certs, err := pki.ParseCertificates(text)
	if err != nil && strings.Contains(err.Error(), "not a CERTIFICATE") {
		return nil, fmt.Errorf("%w (a key goes in privateKey)", err)
	}
	return certs, err
}
