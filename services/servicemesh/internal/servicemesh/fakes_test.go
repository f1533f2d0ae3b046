package servicemesh_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// testCA is a certificate with its key, PEM.
type testCA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM string
	keyPEM  string
}

// newCA makes a CA certificate signed by parent (nil: self-signed), as
// cadist makes them (CA:true, no EKU, URI name constraint to the trust
// domain for intermediates) but deterministic, so that golden files hold:
// an Ed25519 key from a seed and a serial both derived from cn, fixed
// validity (Ed25519 signatures take no randomness).
func newCA(t *testing.T, cn string, parent *testCA, trustDomain string) *testCA {
	t.Helper()
	seed := sha256.Sum256([]byte("servicemesh test CA " + cn))
	key := ed25519.NewKeyFromSeed(seed[:])
	tmpl := &x509.Certificate{
		SerialNumber:          new(big.Int).SetBytes(seed[:8]),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2036, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	if trustDomain != "" {
		tmpl.MaxPathLenZero = true
		tmpl.PermittedURIDomains = []string{trustDomain}
		tmpl.PermittedDNSDomainsCritical = true
	}
	signer, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, key.Public(), signerKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return &testCA{
		cert: cert, key: key,
		certPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		keyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})),
	}
}

// fakeCadist is CA distribution's internal API with real certificates:
// one root, an intermediate per (logical cloud, cluster) made at issue.
type fakeCadist struct {
	t    *testing.T
	root *testCA
	mu   sync.Mutex
	// issued by "<lc>/<provider>/<cluster>".
	issued  map[string]*testCA
	issues  []*cadistv1.IssueIntermediatesRequest
	revokes []*cadistv1.RevokeIntermediatesRequest
}

func newFakeCadist(t *testing.T) *fakeCadist {
	return &fakeCadist{t: t, root: newCA(t, "test root", nil, ""), issued: map[string]*testCA{}}
}

func key(lc string, c *cadistv1.MeshCluster) string {
	return lc + "/" + c.GetProvider() + "/" + c.GetCluster()
}

func (f *fakeCadist) bundle(lc string, c *cadistv1.MeshCluster, ca *testCA, td string) *cadistv1.Bundle {
	return &cadistv1.Bundle{
		LogicalCloud: lc, ClusterProvider: c.GetProvider(), Cluster: c.GetCluster(),
		CaCert: ca.certPEM, CertChain: ca.certPEM + f.root.certPEM, RootCert: f.root.certPEM,
		Serial: fmt.Sprintf("%x", ca.cert.SerialNumber), NotAfter: ca.cert.NotAfter.UTC().Format(time.RFC3339), TrustDomain: td,
	}
}

func (f *fakeCadist) IssueIntermediates(_ context.Context, in *cadistv1.IssueIntermediatesRequest, _ ...grpc.CallOption) (*cadistv1.IssueIntermediatesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.issues = append(f.issues, in)
	out := &cadistv1.IssueIntermediatesResponse{}
	for _, c := range in.GetClusters() {
		k := key(in.GetLogicalCloud(), c)
		if f.issued[k] == nil {
			f.issued[k] = newCA(f.t, "intermediate "+k, f.root, in.GetTrustDomain())
		}
		out.Bundles = append(out.Bundles, f.bundle(in.GetLogicalCloud(), c, f.issued[k], in.GetTrustDomain()))
	}
	return out, nil
}

func (f *fakeCadist) GetIntermediate(_ context.Context, in *cadistv1.GetIntermediateRequest, _ ...grpc.CallOption) (*cadistv1.GetIntermediateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ca := f.issued[key(in.GetLogicalCloud(), in.GetCluster())]
	if ca == nil {
		return nil, errs.NotFound("no intermediate")
	}
	return &cadistv1.GetIntermediateResponse{Bundle: f.bundle(in.GetLogicalCloud(), in.GetCluster(), ca, ""), CaKey: ca.keyPEM}, nil
}

func (f *fakeCadist) RevokeIntermediates(_ context.Context, in *cadistv1.RevokeIntermediatesRequest, _ ...grpc.CallOption) (*cadistv1.RevokeIntermediatesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revokes = append(f.revokes, in)
	return &cadistv1.RevokeIntermediatesResponse{}, nil
}

func (f *fakeCadist) PurgeLogicalCloud(context.Context, *cadistv1.PurgeLogicalCloudRequest, ...grpc.CallOption) (*cadistv1.PurgeLogicalCloudResponse, error) {
	return &cadistv1.PurgeLogicalCloudResponse{}, nil
}

// leafCert is a PEM certificate signed by ca that is no CA.
func leafCert(t *testing.T, ca *testCA) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func (f *fakeCadist) CheckRoot(context.Context, *cadistv1.CheckRootRequest, ...grpc.CallOption) (*cadistv1.CheckRootResponse, error) {
	return &cadistv1.CheckRootResponse{}, nil
}
