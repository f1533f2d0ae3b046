// Package certs issues the Secrets of the cert-manager Certificates of a
// namespace as cert-manager's controller would, for clusters that have
// cert-manager's CRDs but not its controller (the local test clusters:
// cert-manager's controller main is the module
// github.com/cert-manager/cert-manager/controller-binary in the repository's
// cmd/controller, which replaces the root module with ../../: it is not
// published, the module proxy has nothing under either path, so it cannot be
// built from a pinned module; and there is no image of it to load). It reads the Issuers and
// Certificates with kubectl and writes each Certificate's Secret (tls.crt,
// tls.key, ca.crt; type kubernetes.io/tls): the Certificates of
// selfSigned Issuers first, then those of CA Issuers from their Secret.
// It supports what deploy/ uses: ECDSA P-256 keys, common name,
// organizations, DNS names, usages, duration, isCA. It does not renew.
package certs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// Kubectl runs kubectl against the cluster and returns its output.
type Kubectl func(ctx context.Context, args ...string) (string, error)

type certSpec struct {
	SecretName string `json:"secretName"`
	IsCA       bool   `json:"isCA"`
	CommonName string `json:"commonName"`
	Duration   string `json:"duration"`
	Subject    struct {
		Organizations []string `json:"organizations"`
	} `json:"subject"`
	DNSNames  []string `json:"dnsNames"`
	Usages    []string `json:"usages"`
	IssuerRef struct {
		Name string `json:"name"`
		Kind string `json:"kind"`
	} `json:"issuerRef"`
	PrivateKey struct {
		Algorithm string `json:"algorithm"`
		Size      int    `json:"size"`
	} `json:"privateKey"`
}

type issuerSpec struct {
	SelfSigned *struct{} `json:"selfSigned"`
	CA         *struct {
		SecretName string `json:"secretName"`
	} `json:"ca"`
}

type issued struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// Issue writes the Secret of every Certificate in namespace ns and
// returns their names, in the order written.
func Issue(ctx context.Context, kubectl Kubectl, ns string) ([]string, error) {
	out, err := kubectl(ctx, "-n", ns, "get", "issuers.cert-manager.io,certificates.cert-manager.io", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec json.RawMessage `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, err
	}
	issuers := map[string]issuerSpec{}
	var pending []certSpec
	for _, it := range list.Items {
		switch it.Kind {
		case "Issuer":
			var s issuerSpec
			if err := json.Unmarshal(it.Spec, &s); err != nil {
				return nil, fmt.Errorf("certs: Issuer %s: %w", it.Metadata.Name, err)
			}
			issuers[it.Metadata.Name] = s
		case "Certificate":
			var s certSpec
			if err := json.Unmarshal(it.Spec, &s); err != nil {
				return nil, fmt.Errorf("certs: Certificate %s: %w", it.Metadata.Name, err)
			}
			pending = append(pending, s)
		}
	}
	dir, err := os.MkdirTemp("", "dcm-certs-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	done := map[string]issued{} // by Secret name
	var names []string
	// Each round issues what has its Issuer's Secret: a CA Issuer's
	// Certificates after the Certificate that makes its Secret.
	for len(pending) > 0 {
		var later []certSpec
		for _, s := range pending {
			iss, ok := issuers[s.IssuerRef.Name]
			if !ok || s.IssuerRef.Kind != "Issuer" {
				return nil, fmt.Errorf("certs: Certificate %s: issuerRef %s %q is no Issuer of %s", s.SecretName, s.IssuerRef.Kind, s.IssuerRef.Name, ns)
			}
			var parent *issued
			switch {
			case iss.SelfSigned != nil:
			case iss.CA != nil:
				p, ok := done[iss.CA.SecretName]
				if !ok {
					later = append(later, s)
					continue
				}
				parent = &p
			default:
				return nil, fmt.Errorf("certs: Issuer %s: neither selfSigned nor ca", s.IssuerRef.Name)
			}
			is, secret, err := issue(s, parent)
			if err != nil {
				return nil, fmt.Errorf("certs: Certificate %s: %w", s.SecretName, err)
			}
			f := filepath.Join(dir, s.SecretName+".json")
			doc, err := json.Marshal(map[string]any{
				"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
				"metadata": map[string]any{"name": s.SecretName, "namespace": ns},
				"data":     secret,
			})
			if err != nil {
				return nil, err
			}
			if err := os.WriteFile(f, doc, 0o600); err != nil {
				return nil, err
			}
			if _, err := kubectl(ctx, "apply", "-f", f); err != nil {
				return nil, err
			}
			done[s.SecretName] = is
			names = append(names, s.SecretName)
		}
		if len(later) == len(pending) {
			return nil, fmt.Errorf("certs: Certificates whose CA Issuer's Secret no Certificate makes: %d left, the first %s", len(later), later[0].SecretName)
		}
		pending = later
	}
	return names, nil
}

// issue makes s's key and certificate, signed by parent (nil: self-signed).
func issue(s certSpec, parent *issued) (issued, map[string][]byte, error) {
	if a := s.PrivateKey.Algorithm; a != "ECDSA" || (s.PrivateKey.Size != 0 && s.PrivateKey.Size != 256) {
		return issued{}, nil, fmt.Errorf("privateKey %s %d: only ECDSA 256 is supported", a, s.PrivateKey.Size)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return issued{}, nil, err
	}
	life := 90 * 24 * time.Hour // cert-manager's default duration
	if s.Duration != "" {
		if life, err = time.ParseDuration(s.Duration); err != nil {
			return issued{}, nil, fmt.Errorf("duration: %w", err)
		}
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return issued{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: s.CommonName, Organization: s.Subject.Organizations},
		DNSNames:              s.DNSNames,
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(life),
		BasicConstraintsValid: true,
		IsCA:                  s.IsCA,
	}
	usages := s.Usages
	if len(usages) == 0 {
		usages = []string{"digital signature", "key encipherment"} // cert-manager's default
	}
	for _, u := range usages {
		switch u {
		case "server auth":
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		case "client auth":
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
		case "digital signature":
			tmpl.KeyUsage |= x509.KeyUsageDigitalSignature
		case "key encipherment":
			tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
		default:
			return issued{}, nil, fmt.Errorf("usage %q is not supported", u)
		}
	}
	if s.IsCA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	signerCert, signerKey := tmpl, key
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signerKey)
	if err != nil {
		return issued{}, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return issued{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	caPEM := certPEM // a self-signed certificate is its own CA
	if parent != nil {
		caPEM = parent.pem
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return issued{}, nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	return issued{cert: cert, key: key, pem: certPEM}, map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": caPEM}, nil
}
