package cadist_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/cadist/internal/cadist"
)

// rootReq is a root for projects or, with none, a shared root (any
// project's logical clouds may name it).
func rootReq(name, cert, key, chain, keyType string, projects ...string) *cadistv1.CreateRootRequest {
	return &cadistv1.CreateRootRequest{Root: &cadistv1.Root{Metadata: &typesv1.Metadata{Name: name},
		Certificate: cert, PrivateKey: key, Chain: chain, KeyType: keyType, Projects: projects, Shared: len(projects) == 0}}
}

// noKey fails if a public answer carries a private key.
func noKey(t *testing.T, msgs ...proto.Message) {
	t.Helper()
	for _, m := range msgs {
		j, err := protojson.Marshal(m)
		require.NoError(t, err)
		require.NotContains(t, string(j), "PRIVATE KEY")
	}
}

// TestImportErrors: each bad import is refused naming its field, and
// nothing is stored.
func TestImportErrors(t *testing.T) {
	t.Parallel()
	f := serve(t, cadist.Options{})
	ctx := context.Background()
	caCert, ca, caKey := makeCA(t, caSpec{isCA: true, pathLen: -1})
	_, _, otherKey := makeCA(t, caSpec{isCA: true, pathLen: -1})
	_, leaf, _ := makeCA(t, caSpec{isCA: false})
	_, expired, expiredKey := makeCA(t, caSpec{isCA: true, pathLen: -1, notBefore: time.Now().Add(-48 * time.Hour), notAfter: time.Now().Add(-time.Hour)})
	_, pathZero, pathZeroKey := makeCA(t, caSpec{isCA: true, pathLen: 0})
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	_, weakCA, _ := makeCA(t, caSpec{isCA: true, pathLen: -1, key: weak})
	_, strangerCA, _ := makeCA(t, caSpec{isCA: true, pathLen: -1})
	_, inter, interKey := makeCA(t, caSpec{isCA: true, pathLen: 1, parent: caCert, parentKey: parseSigner(t, caKey)})
	_, clientOnly, clientOnlyKey := makeCA(t, caSpec{isCA: true, pathLen: -1, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	pathZeroCert, pathZeroPEM, pathZeroCAKey := makeCA(t, caSpec{isCA: true, pathLen: 0})
	_, belowZero, belowZeroKey := makeCA(t, caSpec{isCA: true, pathLen: -1, parent: pathZeroCert, parentKey: parseSigner(t, pathZeroCAKey)})

	for name, c := range map[string]struct {
		req   *cadistv1.CreateRootRequest
		field string
	}{
		"malformed PEM":             {rootReq("r", "not pem", "", "", ""), "root.certificate"},
		"truncated PEM":             {rootReq("r", ca[:len(ca)/2], "", "", ""), "root.certificate"},
		"key in certificate":        {rootReq("r", ca+caKey, "", "", ""), "root.certificate"},
		"two certificates":          {rootReq("r", ca+ca, "", "", ""), "root.certificate"},
		"not a CA":                  {rootReq("r", leaf, "", "", ""), "root.certificate"},
		"expired":                   {rootReq("r", expired, expiredKey, "", ""), "root.certificate"},
		"path length 0":             {rootReq("r", pathZero, pathZeroKey, "", ""), "root.certificate"},
		"RSA 1024":                  {rootReq("r", weakCA, "", "", ""), "root.certificate"},
		"key of another cert":       {rootReq("r", ca, otherKey, "", ""), "root.privateKey"},
		"not a key":                 {rootReq("r", ca, "nope", "", ""), "root.privateKey"},
		"key without certificate":   {rootReq("r", "", caKey, "", ""), "root.certificate"},
		"unknown key type":          {rootReq("r", "", "", "", "ed25519"), "root.key-type"},
		"key type on import":        {rootReq("r", ca, caKey, "", cadist.KeyRSA4096), "root.key-type"},
		"chain not the issuer":      {rootReq("r", inter, interKey, strangerCA, ""), "root.chain"},
		"chain of a generated root": {rootReq("r", "", "", ca, ""), "root.chain"},
		"chain not PEM":             {rootReq("r", inter, interKey, "junk", ""), "root.chain"},
		"EKU without serverAuth":    {rootReq("r", clientOnly, clientOnlyKey, "", ""), "root.certificate"},
		"issuer of path length 0":   {rootReq("r", belowZero, belowZeroKey, pathZeroPEM, ""), "root.chain"},
	} {
		_, err := f.pub.CreateRoot(ctx, c.req)
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", name, err)
		require.Equal(t, c.field, fieldOf(err), "%s: %v", name, err)
		require.NotContains(t, err.Error(), "PRIVATE KEY", name)
	}
	list, err := f.pub.ListRoots(ctx, &cadistv1.ListRootsRequest{})
	require.NoError(t, err)
	require.Empty(t, list.GetRoots(), "nothing stored")
}

// TestImportIntermediate: an imported intermediate with its issuer as
// chain signs; bundles chain up to the issuer, which is the trust anchor.
func TestImportIntermediate(t *testing.T) {
	t.Parallel()
	f := serve(t, cadist.Options{})
	ctx := context.Background()
	rootCert, rootPEM, rootKey := makeCA(t, caSpec{isCA: true, pathLen: -1})
	_, interPEM, interKey := makeCA(t, caSpec{isCA: true, pathLen: 1, parent: rootCert, parentKey: parseSigner(t, rootKey)})
	created, err := f.pub.CreateRoot(ctx, rootReq("corp", interPEM, interKey, rootPEM, ""))
	require.NoError(t, err)
	require.Equal(t, cadist.StateReady, created.GetRoot().GetState())
	require.Equal(t, cadist.KeyECDSAP256, created.GetRoot().GetKeyType())
	noKey(t, created)

	anchor, err := f.pub.GetRootCertificate(ctx, &cadistv1.GetRootCertificateRequest{Name: "corp"})
	require.NoError(t, err)
	require.Equal(t, cadist.PEMContentType, anchor.GetContentType())
	require.Equal(t, rootPEM, string(anchor.GetData()))

	resp, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "corp", "lc1.p1.dcm.local", "c1"))
	require.NoError(t, err)
	b := resp.GetBundles()[0]
	require.Equal(t, b.GetCaCert()+interPEM+rootPEM, b.GetCertChain())
	require.Equal(t, rootPEM, b.GetRootCert())
	got, err := f.in.GetIntermediate(ctx, &cadistv1.GetIntermediateRequest{Project: "p1", LogicalCloud: "lc1",
		Cluster: &cadistv1.MeshCluster{Provider: "edge", Cluster: "c1"}})
	require.NoError(t, err)
	ic := parseCert(t, b.GetCaCert())
	leaf := leafFrom(t, ic, got.GetCaKey(), "spiffe://lc1.p1.dcm.local/ns/a/sa/b")
	_, err = leaf.Verify(x509.VerifyOptions{Roots: certPool(t, b.GetRootCert()), Intermediates: certPool(t, b.GetCertChain())})
	require.NoError(t, err)
}

// TestRootsOffPath: a create answers before the key exists; the
// generator finishes it; a restarted service resumes the roots left
// generating.
func TestRootsOffPath(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	stopped := cadist.New(st, cadist.Options{}) // its generator never runs: a program that stopped
	created, err := stopped.CreateRoot(ctx, rootReq("slow", "", "", "", cadist.KeyRSA4096))
	require.NoError(t, err)
	require.Equal(t, cadist.StateGenerating, created.GetRoot().GetState())
	require.Empty(t, created.GetRoot().GetCertificate())
	require.False(t, created.GetRoot().GetHasPrivateKey())
	_, err = stopped.GetRootCertificate(ctx, &cadistv1.GetRootCertificateRequest{Name: "slow"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Equal(t, errs.ReasonWrongState, errs.ReasonOf(status.Convert(err)))
	_, err = stopped.IssueIntermediates(ctx, issueReq("p1", "lc1", "slow", "td.local", "c1"))
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "a root that is not ready does not sign")
	require.Equal(t, "root", fieldOf(err))

	restarted := cadist.New(st, cadist.Options{})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		_ = restarted.Run(runCtx)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()
	var root *cadistv1.Root
	require.Eventually(t, func() bool {
		got, err := restarted.GetRoot(ctx, &cadistv1.GetRootRequest{Name: "slow"})
		require.NoError(t, err)
		root = got.GetRoot()
		return root.GetState() == cadist.StateReady
	}, 60*time.Second, 50*time.Millisecond)
	require.True(t, root.GetHasPrivateKey())
	require.Equal(t, cadist.KeyRSA4096, root.GetKeyType())
	cert := parseCert(t, root.GetCertificate())
	require.Equal(t, 4096, cert.PublicKey.(*rsa.PublicKey).N.BitLen())
	require.True(t, cert.IsCA)
	require.Empty(t, cert.ExtKeyUsage)
	require.Equal(t, 1, cert.MaxPathLen, "path length 1: it signs intermediates that sign workloads")
	require.NotEmpty(t, root.GetNotAfter())
	noKey(t, root)

	resp, err := restarted.IssueIntermediates(ctx, issueReq("p1", "lc1", "slow", "td.local", "c1"))
	require.NoError(t, err)
	_, err = parseCert(t, resp.GetBundles()[0].GetCaCert()).Verify(x509.VerifyOptions{Roots: certPool(t, resp.GetBundles()[0].GetRootCert())})
	require.NoError(t, err)

	_, err = restarted.DeleteRoot(ctx, &cadistv1.DeleteRootRequest{Name: "slow"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "it signs a live intermediate")
	require.Equal(t, errs.ReasonReferenced, errs.ReasonOf(status.Convert(err)))
	_, err = restarted.RevokeIntermediates(ctx, &cadistv1.RevokeIntermediatesRequest{Project: "p1", LogicalCloud: "lc1"})
	require.NoError(t, err)
	_, err = restarted.DeleteRoot(ctx, &cadistv1.DeleteRootRequest{Name: "slow"})
	require.NoError(t, err)
}

// TestProjectDefaultRoot: a root listed for a project signs its logical
// clouds that name no root; other projects get the installation's.
func TestProjectDefaultRoot(t *testing.T) {
	t.Parallel()
	f := serve(t, cadist.Options{})
	ctx := context.Background()
	_, ca, key := makeCA(t, caSpec{isCA: true, pathLen: -1})
	_, err := f.pub.CreateRoot(ctx, rootReq("p1-root", ca, key, "", "", "p1"))
	require.NoError(t, err)
	_, err = f.pub.CreateRoot(ctx, rootReq("again", "", "", "", "", "p1"))
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Equal(t, "root.projects", fieldOf(err))

	p1, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc", "", "lc.p1.local", "c1"))
	require.NoError(t, err)
	require.Equal(t, "p1-root", p1.GetBundles()[0].GetRoot())
	p2, err := f.in.IssueIntermediates(ctx, issueReq("p2", "lc", "", "lc.p2.local", "c1"))
	require.NoError(t, err)
	require.Equal(t, cadist.InstallationRoot, p2.GetBundles()[0].GetRoot())
	inst, err := f.pub.GetRoot(ctx, &cadistv1.GetRootRequest{Name: cadist.InstallationRoot})
	require.NoError(t, err)
	require.Equal(t, cadist.StateReady, inst.GetRoot().GetState())
	noKey(t, p1, p2, inst)
}
