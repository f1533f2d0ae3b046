package cadist_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/status"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/cadist/internal/cadist"
)

// clock is a fake clock tests move forward.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fixture is the service served over real gRPC on a fresh store, its
// root generator running.
type fixture struct {
	pub cadistv1.CaDistServiceClient
	in  cadistv1.CaDistInternalServiceClient
	svc *cadist.Service
}

func serve(t *testing.T, opts cadist.Options) fixture {
	t.Helper()
	var svc *cadist.Service
	conn := servertest.Serve(t, func(st *store.Store) []server.Service {
		svc = cadist.New(st, opts)
		return []server.Service{svc}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = svc.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return fixture{pub: cadistv1.NewCaDistServiceClient(conn), in: cadistv1.NewCaDistInternalServiceClient(conn), svc: svc}
}

// fieldOf is the field an error names.
func fieldOf(err error) string { return errs.FieldOf(status.Convert(err)) }

func parseCert(t *testing.T, pemText string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode([]byte(pemText))
	require.NotNil(t, block, "PEM certificate")
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

func certPool(t *testing.T, pemText string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	require.True(t, p.AppendCertsFromPEM([]byte(pemText)))
	return p
}

// leafFrom issues a workload certificate with a SPIFFE URI from an
// intermediate's PEM key, as istiod would.
func leafFrom(t *testing.T, ca *x509.Certificate, caKeyPEM, spiffe string) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode([]byte(caKeyPEM))
	require.NotNil(t, block)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	u, err := url.Parse(spiffe)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{u},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, k.(crypto.Signer))
	require.NoError(t, err)
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return c
}

// caPEM makes a CA certificate and its key (SEC 1), self-signed unless
// parent is given; pathLen < 0 leaves the path length unset.
type caSpec struct {
	isCA      bool
	pathLen   int
	notBefore time.Time
	notAfter  time.Time
	key       crypto.Signer
	parent    *x509.Certificate
	parentKey crypto.Signer
	eku       []x509.ExtKeyUsage
}

func makeCA(t *testing.T, s caSpec) (*x509.Certificate, string, string) {
	t.Helper()
	if s.key == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		s.key = k
	}
	if s.notBefore.IsZero() {
		s.notBefore = time.Now().Add(-time.Hour)
	}
	if s.notAfter.IsZero() {
		s.notAfter = time.Now().Add(24 * time.Hour)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: s.notBefore, NotAfter: s.notAfter,
		IsCA: s.isCA, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	tmpl.ExtKeyUsage = s.eku
	if s.isCA && s.pathLen >= 0 {
		tmpl.MaxPathLen, tmpl.MaxPathLenZero = s.pathLen, s.pathLen == 0
	}
	if !s.isCA {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	parent, parentKey := tmpl, s.key
	if s.parent != nil {
		parent, parentKey = s.parent, s.parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, s.key.Public(), parentKey)
	require.NoError(t, err)
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(s.key)
	require.NoError(t, err)
	return c, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

// waitReady polls a root until the generator made it ready.
func waitReady(t *testing.T, c cadistv1.CaDistServiceClient, name string) *cadistv1.Root {
	t.Helper()
	var last *cadistv1.Root
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		got, err := c.GetRoot(context.Background(), &cadistv1.GetRootRequest{Name: name})
		require.NoError(t, err)
		if last = got.GetRoot(); last.GetState() == cadist.StateReady {
			return last
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("root %s not ready: last seen %v", name, last)
	return nil
}

func parseSigner(t *testing.T, keyPEM string) crypto.Signer {
	t.Helper()
	block, _ := pem.Decode([]byte(keyPEM))
	require.NotNil(t, block)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	return k.(crypto.Signer)
}

func certPEMOf(c *x509.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}
