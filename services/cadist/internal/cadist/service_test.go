package cadist_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/cadist/internal/cadist"
)

func certPEM(t *testing.T, isCA bool) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "root"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: isCA, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

func TestRoots(t *testing.T) {
	t.Parallel()
	c := cadistv1.NewCaDistServiceClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		return []server.Service{cadist.New(st, cadist.Options{})}
	}))
	ctx := context.Background()
	create := func(name, cert string) error {
		_, err := c.CreateRoot(ctx, &cadistv1.CreateRootRequest{Root: &cadistv1.Root{Metadata: &typesv1.Metadata{Name: name}, Certificate: cert}})
		return err
	}
	ca, key := certPEM(t, true)
	leaf, _ := certPEM(t, false)
	require.NoError(t, create("root-1", ca))
	for _, bad := range []string{"not pem", leaf, ca + key, key} {
		require.Equal(t, codes.InvalidArgument, status.Code(create("root-2", bad)))
	}
	list, err := c.ListRoots(ctx, &cadistv1.ListRootsRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetRoots(), 1)
	require.Equal(t, ca, list.GetRoots()[0].GetCertificate())
	_, err = c.DeleteRoot(ctx, &cadistv1.DeleteRootRequest{Name: "root-1"})
	require.NoError(t, err)
}

// TestRootKeys: a root is generated with its key, or imported with the
// matching key; the key is never answered.
func TestRootKeys(t *testing.T) {
	t.Parallel()
	c := serve(t, cadist.Options{}).pub
	ctx := context.Background()
	create := func(name, cert, key string) (*cadistv1.Root, error) {
		r, err := c.CreateRoot(ctx, &cadistv1.CreateRootRequest{Root: &cadistv1.Root{
			Metadata: &typesv1.Metadata{Name: name}, Certificate: cert, PrivateKey: key}})
		return r.GetRoot(), err
	}
	gen, err := create("generated", "", "")
	require.NoError(t, err)
	require.Equal(t, cadist.StateGenerating, gen.GetState(), "generated off the request path")
	gen = waitReady(t, c, "generated")
	require.True(t, gen.GetHasPrivateKey())
	require.Empty(t, gen.GetPrivateKey())
	block, _ := pem.Decode([]byte(gen.GetCertificate()))
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.True(t, cert.IsCA)

	ca, key := certPEM(t, true)
	_, otherKey := certPEM(t, true)
	imported, err := create("imported", ca, key)
	require.NoError(t, err)
	require.True(t, imported.GetHasPrivateKey())
	got, err := c.GetRoot(ctx, &cadistv1.GetRootRequest{Name: "imported"})
	require.NoError(t, err)
	require.Empty(t, got.GetRoot().GetPrivateKey())
	require.NotContains(t, got.String(), "PRIVATE KEY")

	for name, in := range map[string][2]string{
		"key without certificate": {"", key},
		"key of another cert":     {ca, otherKey},
		"not a key":               {ca, "nope"},
	} {
		_, err := create("bad", in[0], in[1])
		require.Equal(t, codes.InvalidArgument, status.Code(err), name)
		require.NotContains(t, err.Error(), "PRIVATE KEY", name)
	}
}
