package servicemesh

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
)

// Where the fields of a control plane's own CA are in a body: under
// control_plane in CreateControlPlane's, at the top of core's seed 002
// body (SetControlPlaneCA).
const (
	inControlPlane = "control_plane."
	atTop          = ""
)

// checkCustomCA checks a control plane's own CA: all four fields or none;
// each PEM; the key is ca-cert's; ca-cert is a CA (CA:true, may sign
// certificates); ca-cert verifies to a root of root-cert through
// cert-chain, as istiod checks it (util.Verify: no key usage asked). It
// answers whether the CA is given. Errors name the fields after prefix.
func checkCustomCA(prefix string, cp *servicemeshv1.ControlPlane) (bool, error) {
	fieldCACert, fieldCAKey := prefix+"ca-cert", prefix+"ca-key"
	fieldRootCert, fieldCertChain := prefix+"root-cert", prefix+"cert-chain"
	fields := []struct{ name, value string }{
		{fieldCACert, cp.GetCaCert()}, {fieldCAKey, cp.GetCaKey()},
		{fieldRootCert, cp.GetRootCert()}, {fieldCertChain, cp.GetCertChain()},
	}
	given := 0
	for _, f := range fields {
		if strings.TrimSpace(f.value) != "" {
			given++
		}
	}
	if given == 0 {
		return false, nil
	}
	for _, f := range fields {
		if strings.TrimSpace(f.value) == "" {
			return false, errs.Invalid(f.name, "is required with the other CA fields (ca-cert, ca-key, root-cert, cert-chain: all four or none)")
		}
	}
	certs, err := parseCerts(fieldCACert, cp.GetCaCert())
	if err != nil {
		return false, err
	}
	ca := certs[0]
	if !ca.IsCA || !ca.BasicConstraintsValid {
		return false, errs.Invalid(fieldCACert, "is not a CA certificate (basic constraints CA:true)")
	}
	if ca.KeyUsage != 0 && ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		return false, errs.Invalid(fieldCACert, "may not sign certificates (key usage without certSign)")
	}
	if err := checkKey(fieldCAKey, cp.GetCaKey(), ca); err != nil {
		return false, err
	}
	roots, err := parseCerts(fieldRootCert, cp.GetRootCert())
	if err != nil {
		return false, err
	}
	chain, err := parseCerts(fieldCertChain, cp.GetCertChain())
	if err != nil {
		return false, err
	}
	rootPool, inter := x509.NewCertPool(), x509.NewCertPool()
	for _, r := range roots {
		rootPool.AddCert(r)
	}
	for _, c := range chain {
		inter.AddCert(c)
	}
	if _, err := ca.Verify(x509.VerifyOptions{Roots: rootPool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return false, errs.Invalid(fieldCertChain, "ca-cert does not verify to root-cert through cert-chain: %v", err)
	}
	return true, nil
}

func parseCerts(field, text string) ([]*x509.Certificate, error) {
	certs, err := pki.ParseCertificates(text)
	if err == nil && len(certs) == 0 {
		err = errors.New("is not PEM certificates")
	}
	if err != nil {
		return nil, errs.Invalid(field, "%v", err)
	}
	return certs, nil
}

// checkKey checks that keyPEM, the body's field, is one private key, ca's.
func checkKey(fieldCAKey, keyPEM string, ca *x509.Certificate) error {
	b, rest := pem.Decode([]byte(keyPEM))
	if b == nil || strings.TrimSpace(string(rest)) != "" || !strings.HasSuffix(b.Type, "PRIVATE KEY") {
		return errs.Invalid(fieldCAKey, "is not one PEM private key")
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	pair, err := tls.X509KeyPair(certPEM, []byte(keyPEM))
	if err != nil {
		return errs.Invalid(fieldCAKey, "is not ca-cert's private key: %v", err)
	}
	if _, ok := pair.PrivateKey.(crypto.Signer); !ok {
		return errs.Invalid(fieldCAKey, "%T cannot sign", pair.PrivateKey)
	}
	return nil
}

// certInfo is a PEM certificate's serial in hexadecimal and expiry
// (RFC 3339); empty if it does not parse.
func certInfo(certPEM string) (serial, notAfter string) {
	b, _ := pem.Decode([]byte(certPEM))
	if b == nil {
		return "", ""
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return "", ""
	}
	return fmt.Sprintf("%x", c.SerialNumber), c.NotAfter.UTC().Format(time.RFC3339)
}
