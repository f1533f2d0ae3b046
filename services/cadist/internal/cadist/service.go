// Package cadist implements the CA-distribution service. This version holds
// root CA certificates (public part only: private keys wait for encryption
// at rest); issuing per-cluster intermediates comes later.
package cadist

import (
	"context"
	"crypto/x509"
	"encoding/pem"

	"google.golang.org/grpc"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/errs"
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

// CreateRoot implements cadistv1.CaDistServiceServer: the certificate must be
// one PEM CA certificate, and nothing else (a private key is refused).
func (s *Service) CreateRoot(ctx context.Context, req *cadistv1.CreateRootRequest) (*cadistv1.CreateRootResponse, error) {
	r := req.GetRoot()
	if err := checkCA(r.GetCertificate()); err != nil {
		return nil, err
	}
	if err := s.roots.Create(ctx, r.GetMetadata().GetName(), "", r); err != nil {
		return nil, err
	}
	return &cadistv1.CreateRootResponse{Root: r}, nil
}

func checkCA(pemText string) error {
	const field = "root.certificate"
	block, rest := pem.Decode([]byte(pemText))
	if block == nil || block.Type != "CERTIFICATE" {
		return errs.Invalid(field, "must be a PEM CERTIFICATE block")
	}
	if len(rest) > 0 {
		if more, _ := pem.Decode(rest); more != nil {
			return errs.Invalid(field, "must hold one certificate and nothing else")
		}
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return errs.Invalid(field, "not an X.509 certificate: %v", err)
	}
	if !cert.IsCA {
		return errs.Invalid(field, "not a CA certificate (basicConstraints CA is false)")
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
func (s *Service) ListRoots(ctx context.Context, _ *cadistv1.ListRootsRequest) (*cadistv1.ListRootsResponse, error) {
	rs, err := s.roots.List(ctx, "")
	if err != nil {
		return nil, err
	}
	return &cadistv1.ListRootsResponse{Roots: rs}, nil
}

// DeleteRoot implements cadistv1.CaDistServiceServer.
func (s *Service) DeleteRoot(ctx context.Context, req *cadistv1.DeleteRootRequest) (*cadistv1.DeleteRootResponse, error) {
	if err := s.roots.Delete(ctx, req.GetName()); err != nil {
		return nil, err
	}
	return &cadistv1.DeleteRootResponse{}, nil
}
