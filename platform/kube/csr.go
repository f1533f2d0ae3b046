package kube

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"

	"github.com/dcm-project/dcm/platform/pki"
)

// NewCSR makes a P-256 key and a certificate signing request for common
// name cn (a Kubernetes user) and organizations orgs (its groups); both
// are returned as PEM.
func NewCSR(cn string, orgs ...string) (csrPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = pki.KeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), keyPEM, nil
}

// CSRManifest is a CertificateSigningRequest object, as JSON, named name
// and labelled labels (nil: none), that asks a cluster's
// kube-apiserver-client signer for a client certificate for csrPEM.
func CSRManifest(name string, csrPEM []byte, labels map[string]string) string {
	return Manifest("certificates.k8s.io/v1", "CertificateSigningRequest", Meta{Name: name, Labels: labels}, map[string]any{
		"spec": map[string]any{
			"request":    base64.StdEncoding.EncodeToString(csrPEM),
			"signerName": "kubernetes.io/kube-apiserver-client",
			"usages":     []string{"client auth"},
		},
	})
}
