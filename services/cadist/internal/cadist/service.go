// Package cadist implements the CA-distribution service. This version holds
// root CAs, generated here or imported, with their private keys sealed at
// rest and never returned; issuing per-cluster intermediates comes later.
package cadist

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"time"

	"google.golang.org/grpc"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/store"
)

// Service is the CA-distribution service's gRPC API.
type Service struct {
	cadistv1.UnimplementedCaDistServiceServer
	roots *store.Records[*cadistv1.Root]
}

// New opens the service's collections on st.
func New(st *store.Store) *Service {
	return &Service{roots: store.NewRecords(st, "ca_roots", "root", func() *cadistv1.Root { return &cadistv1.Root{} })}
}

// Register serves the API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) { cadistv1.RegisterCaDistServiceServer(r, s) }

// RootValidity is how long a generated root CA is valid.
const RootValidity = 10 * 365 * 24 * time.Hour

// privateKeySecret is the name of a root record's sealed key.
const privateKeySecret = "private_key"

// CreateRoot implements cadistv1.CaDistServiceServer. With no certificate
// it generates a root CA and its key; otherwise the certificate must be one
// PEM CA certificate, and private_key, if given, its matching key.
func (s *Service) CreateRoot(ctx context.Context, req *cadistv1.CreateRootRequest) (*cadistv1.CreateRootResponse, error) {
	in := req.GetRoot()
	certPEM, keyPEM := in.GetCertificate(), in.GetPrivateKey()
	switch {
	case certPEM == "" && keyPEM != "":
		return nil, errs.Invalid("root.certificate", "is required with private_key (leave both empty to generate a root)")
	case certPEM == "":
		ca, err := pki.NewCA(in.GetMetadata().GetName(), RootValidity)
		if err != nil {
			return nil, errs.Internal(err, "generate root CA")
		}
		k, err := pki.KeyPEM(ca.Key)
		if err != nil {
			return nil, errs.Internal(err, "generate root CA")
		}
		certPEM, keyPEM = string(pki.CertPEM(ca.Cert.Raw)), string(k)
	default:
		cert, err := checkCA(certPEM)
		if err != nil {
			return nil, err
		}
		if keyPEM != "" {
			if err := checkKey(keyPEM, cert); err != nil {
				return nil, err
			}
		}
	}
	r := &cadistv1.Root{Metadata: in.GetMetadata(), Certificate: certPEM, HasPrivateKey: keyPEM != ""}
	var secrets []store.Secret
	if keyPEM != "" {
		secrets = append(secrets, store.Secret{Name: privateKeySecret, Value: []byte(keyPEM)})
	}
	if err := s.roots.Create(ctx, r.GetMetadata().GetName(), "", r, secrets...); err != nil {
		return nil, err
	}
	return &cadistv1.CreateRootResponse{Root: r}, nil
}

func checkCA(pemText string) (*x509.Certificate, error) {
	const field = "root.certificate"
	block, rest := pem.Decode([]byte(pemText))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errs.Invalid(field, "must be a PEM CERTIFICATE block")
	}
	if len(rest) > 0 {
		if more, _ := pem.Decode(rest); more != nil {
			return nil, errs.Invalid(field, "must hold one certificate and nothing else (the key goes in private_key)")
		}
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, errs.Invalid(field, "not an X.509 certificate: %v", err)
	}
	if !cert.IsCA {
		return nil, errs.Invalid(field, "not a CA certificate (basicConstraints CA is false)")
	}
	return cert, nil
}

// checkKey checks that keyPEM is the private key of cert. Messages never
// quote the key.
func checkKey(keyPEM string, cert *x509.Certificate) error {
	const field = "root.private_key"
	_, err := tls.X509KeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), []byte(keyPEM))
	if err != nil {
		if block, _ := pem.Decode([]byte(keyPEM)); block == nil || !strings.Contains(block.Type, "PRIVATE KEY") {
			return errs.Invalid(field, "must be a PEM private key")
		}
		return errs.Invalid(field, "is not the private key of the certificate")
	}
	return nil
}

// GetRoot implements cadistv1.CaDistServiceServer.
func (s *Service) GetRoot(ctx context.Context, req *cadistv1.GetRootRequest) (*cadistv1.GetRootResponse, error) {
	r, err := s.roots.Get(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &cadistv1.GetRootResponse{Root: r.Msg}, nil
}

// ListRoots implements cadistv1.CaDistServiceServer.
func (s *Service) ListRoots(ctx context.Context, req *cadistv1.ListRootsRequest) (*cadistv1.ListRootsResponse, error) {
	rs, next, err := s.roots.ListPage(ctx, "", store.PageOf(req))
	if err != nil {
		return nil, err
	}
	return &cadistv1.ListRootsResponse{Roots: rs, NextPageToken: next}, nil
}

// DeleteRoot implements cadistv1.CaDistServiceServer.
func (s *Service) DeleteRoot(ctx context.Context, req *cadistv1.DeleteRootRequest) (*cadistv1.DeleteRootResponse, error) {
	if err := s.roots.Delete(ctx, req.GetName()); err != nil {
		return nil, err
	}
	return &cadistv1.DeleteRootResponse{}, nil
}
