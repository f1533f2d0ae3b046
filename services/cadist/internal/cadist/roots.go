package cadist

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc/codes"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// PEMContentType is the content type of GET /v2/cadist/roots/{root}/certificate.
const PEMContentType = "application/x-pem-file"

// Roots is the roots' API: create, read, list, check and delete. A root
// created without a certificate is left to the generator.
type Roots struct {
	roots *store.Records[*cadistv1.Root]
	// intermediates is read only: a root that signs a live intermediate
	// is not deleted.
	intermediates *store.Records[*cadistv1.Bundle]
	generator     *Generator
	now           func() time.Time
}

// CreateRoot implements cadistv1.CaDistServiceServer. With no certificate
// it stores the root as generating and answers at once; the generator
// (Run) makes the key and certificate in the background. Otherwise the
// certificate must be one PEM CA certificate able to sign intermediates,
// chain its issuers if it is not self-signed, and private_key, if given,
// its matching key.
func (s *Roots) CreateRoot(ctx context.Context, req *cadistv1.CreateRootRequest) (*cadistv1.CreateRootResponse, error) {
	in := req.GetRoot()
	if err := s.checkProjects(ctx, in.GetMetadata().GetName(), in.GetProjects()); err != nil {
		return nil, err
	}
	certPEMText, keyPEMText := in.GetCertificate(), in.GetPrivateKey()
	r := &cadistv1.Root{Metadata: in.GetMetadata(), Projects: in.GetProjects(), Shared: in.GetShared()}
	var secrets []store.Secret
	switch {
	case certPEMText == "" && keyPEMText != "":
		return nil, errs.Invalid("root.certificate", "is required with privateKey (leave both empty to generate a root)")
	case certPEMText == "" && in.GetChain() != "":
		return nil, errs.Invalid("root.chain", "is for an imported certificate only (leave it empty to generate a root)")
	case certPEMText == "":
		switch in.GetKeyType() {
		case "", KeyECDSAP256:
			r.KeyType = KeyECDSAP256
		case KeyRSA4096:
			r.KeyType = KeyRSA4096
		default:
			return nil, errs.Invalid("root.key-type", "must be %q (the default) or %q", KeyECDSAP256, KeyRSA4096)
		}
		r.State = StateGenerating
	default:
		cert, err := s.checkImport(in)
		if err != nil {
			return nil, err
		}
		r.Certificate, r.Chain = certPEMText, in.GetChain()
		r.KeyType, r.State = keyTypeOf(cert.PublicKey), StateReady
		r.NotAfter = cert.NotAfter.UTC().Format(time.RFC3339)
		if keyPEMText != "" {
			r.HasPrivateKey = true
			secrets = append(secrets, store.Secret{Name: privateKeySecret, Value: []byte(keyPEMText)})
		}
	}
	if err := s.roots.Create(ctx, r.GetMetadata().GetName(), "", r, secrets...); err != nil {
		return nil, err
	}
	if r.GetState() == StateGenerating {
		s.generator.kick()
	}
	return &cadistv1.CreateRootResponse{Root: r}, nil
}

// checkImport checks an imported root: its certificate, chain and key.
// Messages never quote the key.
func (s *Roots) checkImport(in *cadistv1.Root) (*x509.Certificate, error) {
	now := s.now()
	if in.GetKeyType() != "" {
		return nil, errs.Invalid("root.key-type", "is for a generated root only (an imported root's key type is its certificate's)")
	}
	certs, err := parseCerts(in.GetCertificate())
	switch {
	case err != nil:
		return nil, errs.Invalid("root.certificate", "%v", err)
	case len(certs) == 0:
		return nil, errs.Invalid("root.certificate", "must be a PEM CERTIFICATE block")
	case len(certs) > 1:
		return nil, errs.Invalid("root.certificate", "must hold one certificate and nothing else (its issuers go in chain, the key in privateKey)")
	}
	cert := certs[0]
	if err := checkSigner(cert, now, true); err != nil {
		return nil, errs.Invalid("root.certificate", "%v", err)
	}
	chain, err := parseCerts(in.GetChain())
	if err != nil {
		return nil, errs.Invalid("root.chain", "%v", err)
	}
	below := cert
	for i, c := range chain {
		if err := checkSigner(c, now, false); err != nil {
			return nil, errs.Invalid("root.chain", "certificate %d: %v", i+1, err)
		}
		if err := below.CheckSignatureFrom(c); err != nil {
			return nil, errs.Invalid("root.chain", "certificate %d did not sign the one before it: %v", i+1, err)
		}
		// Below it: the chain's certificates before it, the imported
		// certificate and the intermediates it signs.
		if need := i + 2; c.MaxPathLen >= 0 && c.MaxPathLen < need {
			return nil, errs.Invalid("root.chain", "certificate %d has path length %d: %d CA certificates stand below it once it signs a mesh's intermediates", i+1, c.MaxPathLen, need)
		}
		below = c
	}
	if len(chain) > 0 {
		// As istiod checks its plugged-in CA: Go's verification with its
		// default usage, serverAuth (docs/mesh.md section 4).
		if err := verifyPath(cert, chain, now); err != nil {
			return nil, errs.Invalid("root.chain", "the certificate does not verify up to the chain's last certificate: %v", err)
		}
	}
	if in.GetPrivateKey() != "" {
		if _, err := tls.X509KeyPair([]byte(certPEM(cert)), []byte(in.GetPrivateKey())); err != nil {
			if _, perr := parseKey([]byte(in.GetPrivateKey())); perr != nil {
				return nil, errs.Invalid("root.privateKey", "must be a PEM private key")
			}
			return nil, errs.Invalid("root.privateKey", "is not the private key of the certificate")
		}
	}
	return cert, nil
}

// checkSigner checks a CA certificate of a root's path: a CA, valid now,
// with a key Istio and DCM accept; the root's own certificate (self) must
// also be allowed to sign an intermediate CA that signs workloads.
func checkSigner(c *x509.Certificate, now time.Time, self bool) error {
	if !c.IsCA || !c.BasicConstraintsValid {
		return fmt.Errorf("not a CA certificate (basicConstraints CA is false)")
	}
	if now.After(c.NotAfter) {
		return fmt.Errorf("expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(c.NotBefore) {
		return fmt.Errorf("not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	}
	if c.KeyUsage != 0 && c.KeyUsage&x509.KeyUsageCertSign == 0 {
		return fmt.Errorf("its key usage does not allow signing certificates")
	}
	if len(c.ExtKeyUsage) > 0 && !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) && !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageAny) {
		return fmt.Errorf("its extended key usage leaves out serverAuth, without which istiod refuses the chain (a mesh CA has no extended key usage, or includes serverAuth)")
	}
	switch k := c.PublicKey.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return fmt.Errorf("RSA key of %d bits; at least %d are needed", k.N.BitLen(), minRSABits)
		}
	case *ecdsa.PublicKey:
	default:
		return fmt.Errorf("key of type %T; ECDSA or RSA only", k)
	}
	if self && c.MaxPathLen == 0 && c.MaxPathLenZero {
		return fmt.Errorf("path length 0: it cannot sign the intermediate CAs that sign workloads (path length 1 or more needed)")
	}
	return nil
}

// checkProjects refuses a project another root is the default for.
func (s *Roots) checkProjects(ctx context.Context, name string, projects []string) error {
	if len(projects) == 0 {
		return nil
	}
	all, err := s.roots.List(ctx, "")
	if err != nil {
		return err
	}
	for _, r := range all {
		for _, p := range projects {
			if r.GetMetadata().GetName() != name && slices.Contains(r.GetProjects(), p) {
				return &errs.Error{Code: codes.FailedPrecondition, Field: "root.projects",
					Msg: fmt.Sprintf("root.projects: root %q is already the default root of project %q", r.GetMetadata().GetName(), p)}
			}
		}
	}
	return nil
}

// mayUse tells whether the logical clouds of project may be signed by
// root r: r is shared, lists the project, or is the installation's root
// (the default of every project without one).
func mayUse(r *cadistv1.Root, project string) bool {
	return r.GetShared() || slices.Contains(r.GetProjects(), project) || r.GetMetadata().GetName() == InstallationRoot
}

// visibleTo is the project whose roots alone the caller may see (mayUse),
// or "" when it may see every root: an admin, a service acting on its
// own, or a caller of no project (a global reader).
func visibleTo(ctx context.Context) string {
	id := server.Caller(ctx)
	if id.Role == pki.RoleAdmin || id.Role == pki.RoleService {
		return ""
	}
	return id.Project
}

// errNoRoot is the answer for a root that is missing or not the caller's
// to see: the same, so a tenant learns nothing of other projects' roots.
func errNoRoot(name string) error {
	return errs.NotFound("root %q not found", name)
}

// visibleRoot reads a root the caller may see.
func (s *Roots) visibleRoot(ctx context.Context, name string) (*cadistv1.Root, error) {
	r, err := s.roots.Get(ctx, name)
	if errs.Code(err) == codes.NotFound {
		return nil, errNoRoot(name)
	}
	if err != nil {
		return nil, err
	}
	if p := visibleTo(ctx); p != "" && !mayUse(r.Msg, p) {
		return nil, errNoRoot(name)
	}
	return r.Msg, nil
}

// GetRoot implements cadistv1.CaDistServiceServer: a caller that is not
// an admin sees only the roots its project may use (mayUse).
func (s *Roots) GetRoot(ctx context.Context, req *cadistv1.GetRootRequest) (*cadistv1.GetRootResponse, error) {
	r, err := s.visibleRoot(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &cadistv1.GetRootResponse{Root: r}, nil
}

// ListRoots implements cadistv1.CaDistServiceServer: a caller that is not
// an admin sees only the roots its project may use (mayUse); its pages
// may then hold fewer roots than page-size.
func (s *Roots) ListRoots(ctx context.Context, req *cadistv1.ListRootsRequest) (*cadistv1.ListRootsResponse, error) {
	rs, next, err := s.roots.ListPage(ctx, "", store.PageOf(req))
	if err != nil {
		return nil, err
	}
	if p := visibleTo(ctx); p != "" {
		rs = slices.DeleteFunc(rs, func(r *cadistv1.Root) bool { return !mayUse(r, p) })
	}
	return &cadistv1.ListRootsResponse{Roots: rs, NextPageToken: next}, nil
}

// CheckRoot implements cadistv1.CaDistInternalServiceServer.
func (s *Roots) CheckRoot(ctx context.Context, req *cadistv1.CheckRootRequest) (*cadistv1.CheckRootResponse, error) {
	r, err := s.roots.Get(ctx, req.GetRoot())
	if errs.Code(err) == codes.NotFound {
		return nil, errs.Invalid("root", "no root %q (see GET /v2/cadist/roots)", req.GetRoot())
	}
	if err != nil {
		return nil, err
	}
	if err := checkUse(r.Msg, req.GetProject()); err != nil {
		return nil, err
	}
	return &cadistv1.CheckRootResponse{}, nil
}

// checkUse refuses root r to the logical clouds of project unless they
// may use it (mayUse): 403 naming root.
func checkUse(r *cadistv1.Root, project string) error {
	if mayUse(r, project) {
		return nil
	}
	return errs.Forbidden("root", "root %q is neither shared nor one of project %q's roots: a logical cloud may name only a root whose projects include its project, or one an admin marked shared",
		r.GetMetadata().GetName(), project)
}

// DeleteRoot implements cadistv1.CaDistServiceServer. A root that signed a
// live intermediate stays: its logical clouds' workloads trust it.
func (s *Roots) DeleteRoot(ctx context.Context, req *cadistv1.DeleteRootRequest) (*cadistv1.DeleteRootResponse, error) {
	used, err := s.intermediates.Match(ctx, map[string]string{"root": req.GetName()})
	if err != nil {
		return nil, err
	}
	for _, it := range used {
		if !it.Msg.GetRevoked() {
			return nil, errs.Because(errs.ReasonReferenced, "root %q signs the live intermediate of logical cloud %q of project %q on cluster %s/%s; rotate that logical cloud to another root first",
				req.GetName(), it.Msg.GetLogicalCloud(), it.Msg.GetProject(), it.Msg.GetClusterProvider(), it.Msg.GetCluster())
		}
	}
	if err := s.roots.Delete(ctx, req.GetName()); err != nil {
		return nil, err
	}
	return &cadistv1.DeleteRootResponse{}, nil
}

// GetRootCertificate implements cadistv1.CaDistServiceServer: the root's
// trust anchor as PEM.
func (s *Roots) GetRootCertificate(ctx context.Context, req *cadistv1.GetRootCertificateRequest) (*httpbody.HttpBody, error) {
	r, err := s.visibleRoot(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	if r.GetState() != StateReady && r.GetState() != "" {
		return nil, notReady(r)
	}
	return &httpbody.HttpBody{ContentType: PEMContentType, Data: []byte(anchorPEM(r))}, nil
}

// anchorPEM is what workloads trust of a root: the last certificate of its
// chain, or its own certificate.
func anchorPEM(r *cadistv1.Root) string {
	if certs, err := parseCerts(r.GetChain()); err == nil && len(certs) > 0 {
		return certPEM(certs[len(certs)-1])
	}
	return r.GetCertificate()
}

func notReady(r *cadistv1.Root) error {
	return &errs.Error{Code: codes.FailedPrecondition, Field: "root", Reason: errs.ReasonWrongState,
		Msg: fmt.Sprintf("root: root %q is still %s; retry once its state is %s", r.GetMetadata().GetName(), r.GetState(), StateReady)}
}

// signingRoot is a ready root with its key, able to sign.
type signingRoot struct {
	msg   *cadistv1.Root
	cert  *x509.Certificate
	chain string // the root's certificate then its chain, PEM
	key   crypto.Signer
}

// rootKeys loads the roots that sign, with their keys.
type rootKeys struct {
	roots *store.Records[*cadistv1.Root]
}

// signer loads a root able to sign: ready, with its key.
func (s *rootKeys) signer(ctx context.Context, name string) (*signingRoot, error) {
	r, err := s.roots.Get(ctx, name)
	if errs.Code(err) == codes.NotFound {
		return nil, errs.Invalid("root", "no root %q (see GET /v2/cadist/roots)", name)
	}
	if err != nil {
		return nil, err
	}
	if r.Msg.GetState() != StateReady && r.Msg.GetState() != "" {
		return nil, notReady(r.Msg)
	}
	if !r.Msg.GetHasPrivateKey() {
		return nil, &errs.Error{Code: codes.FailedPrecondition, Field: "root",
			Msg: fmt.Sprintf("root: root %q was imported without its private key, so it cannot sign", name)}
	}
	certs, err := parseCerts(r.Msg.GetCertificate())
	if err != nil || len(certs) == 0 {
		return nil, errs.Internal(fmt.Errorf("root %q: stored certificate: %v", name, err), "stored root is unreadable")
	}
	keyPEMText, err := s.roots.Secret(ctx, name, privateKeySecret)
	if err != nil {
		return nil, err
	}
	key, err := parseKey(keyPEMText)
	if err != nil {
		return nil, errs.Internal(fmt.Errorf("root %q: stored key: %w", name, err), "stored root is unreadable")
	}
	chain := certPEM(certs[0])
	issuers, err := parseCerts(r.Msg.GetChain())
	if err != nil {
		return nil, errs.Internal(fmt.Errorf("root %q: stored chain: %w", name, err), "stored root is unreadable")
	}
	for _, c := range issuers {
		chain += certPEM(c)
	}
	return &signingRoot{msg: r.Msg, cert: certs[0], chain: chain, key: key}, nil
}

// verifyPath verifies cert up to the last certificate of issuers, the ones
// between as intermediates, with Go's default usage (serverAuth).
func verifyPath(cert *x509.Certificate, issuers []*x509.Certificate, now time.Time) error {
	roots, mid := x509.NewCertPool(), x509.NewCertPool()
	roots.AddCert(issuers[len(issuers)-1])
	for _, c := range issuers[:len(issuers)-1] {
		mid.AddCert(c)
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: roots, Intermediates: mid, CurrentTime: now})
	return err
}
