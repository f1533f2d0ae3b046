package cadist_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/cadist/internal/cadist"
)

// projectRoots makes root-p1 (p1's), root-p2 (p2's) and common (shared),
// all ready.
func projectRoots(t *testing.T, f fixture) {
	t.Helper()
	ctx := context.Background()
	for name, projects := range map[string][]string{"root-p1": {"p1"}, "root-p2": {"p2"}} {
		_, err := f.pub.CreateRoot(ctx, rootReq(name, "", "", "", "", projects...))
		require.NoError(t, err)
		waitReady(t, f.pub, name)
	}
	_, err := f.pub.CreateRoot(ctx, rootReq("common", "", "", "", ""))
	require.NoError(t, err)
	waitReady(t, f.pub, "common")
}

// TestRootOfAnotherProject: a logical cloud of p1 may not have its
// intermediates signed by p2's root (IssueIntermediates with p2's root as
// spec.ca-root, a rotation to it, core's CheckRoot): 403 naming root. Its
// own project's root, a shared one and the installation's sign.
func TestRootOfAnotherProject(t *testing.T) {
	t.Parallel()
	f := serve(t, cadist.Options{})
	ctx := context.Background()
	projectRoots(t, f)
	const td = "lc1.p1.dcm.local"

	_, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "root-p2", td, "c1"))
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Equal(t, "root", fieldOf(err))
	require.Contains(t, status.Convert(err).Message(), `root "root-p2" is neither shared nor one of project "p1"'s roots`)
	ids, err := f.svc.IntermediateIDs(ctx)
	require.NoError(t, err)
	require.Empty(t, ids, "nothing signed")
	common, err := f.pub.GetRoot(ctx, &cadistv1.GetRootRequest{Name: "common"})
	require.NoError(t, err)
	require.True(t, common.GetRoot().GetShared(), "an admin's mark is kept")

	for _, root := range []string{"root-p1", "common", ""} {
		resp, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc-"+root+"x", root, td, "c1"))
		require.NoError(t, err, root)
		if root == "" {
			root = "root-p1" // p1's default root
		}
		require.Equal(t, root, resp.GetBundles()[0].GetRoot())
	}
	_, err = f.in.IssueIntermediates(ctx, issueReq("p3", "lc1", "", "lc1.p3.dcm.local", "c1"))
	require.NoError(t, err, "a project without a root of its own: the installation's")

	// A rotation to another project's root.
	_, err = f.pub.RotateCa(ctx, &cadistv1.RotateCaRequest{Project: "p1", LogicalCloud: "lc-x", Root: "root-p2"})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Equal(t, "root", fieldOf(err))
	_, err = f.pub.RotateCa(ctx, &cadistv1.RotateCaRequest{Project: "p1", LogicalCloud: "lc-x", Root: "common"})
	require.NoError(t, err)

	// Core's check at create and update.
	for root, want := range map[string]codes.Code{"root-p1": codes.OK, "common": codes.OK, cadist.InstallationRoot: codes.OK,
		"root-p2": codes.PermissionDenied, "missing": codes.InvalidArgument} {
		_, err := f.in.CheckRoot(ctx, &cadistv1.CheckRootRequest{Project: "p1", Root: root})
		require.Equal(t, want, status.Code(err), "%s: %v", root, err)
		if err != nil {
			require.Equal(t, "root", fieldOf(err))
		}
	}
}

// TestRootsAReaderSees: a reader or project admin of p1 lists and reads
// only p1's roots, shared ones and the installation's; another project's
// root is not found (list, get, certificate). An admin and a reader of
// every project see all.
func TestRootsAReaderSees(t *testing.T) {
	t.Parallel()
	f := serve(t, cadist.Options{})
	ctx := context.Background()
	projectRoots(t, f)
	_, err := f.in.IssueIntermediates(ctx, issueReq("p3", "lc1", "", "lc1.p3.dcm.local", "c1")) // makes dcm-mesh-root
	require.NoError(t, err)
	as := func(role, project string) context.Context {
		return metadata.NewOutgoingContext(ctx, server.CallerMD(pki.Identity{Subject: "someone", Role: role, Project: project}))
	}
	names := func(c context.Context) []string {
		resp, err := f.pub.ListRoots(c, &cadistv1.ListRootsRequest{})
		require.NoError(t, err)
		var out []string
		for _, r := range resp.GetRoots() {
			out = append(out, r.GetMetadata().GetName())
		}
		return out
	}
	all := []string{"common", cadist.InstallationRoot, "root-p1", "root-p2"}
	require.Equal(t, all, names(as(pki.RoleAdmin, "")))
	require.Equal(t, all, names(as(pki.RoleReader, "")), "a reader of every project")
	for _, role := range []string{pki.RoleReader, pki.RoleProjectAdmin} {
		c := as(role, "p1")
		require.Equal(t, []string{"common", cadist.InstallationRoot, "root-p1"}, names(c), role)
		_, err := f.pub.GetRoot(c, &cadistv1.GetRootRequest{Name: "root-p2"})
		require.Equal(t, codes.NotFound, status.Code(err), role)
		_, err = f.pub.GetRootCertificate(c, &cadistv1.GetRootCertificateRequest{Name: "root-p2"})
		require.Equal(t, codes.NotFound, status.Code(err), role)
		for _, n := range []string{"root-p1", "common"} {
			_, err = f.pub.GetRoot(c, &cadistv1.GetRootRequest{Name: n})
			require.NoError(t, err, role)
			_, err = f.pub.GetRootCertificate(c, &cadistv1.GetRootCertificateRequest{Name: n})
			require.NoError(t, err, role)
		}
	}
	// A page of one at a time still reaches every visible root, and no other.
	var seen []string
	tok := ""
	for {
		resp, err := f.pub.ListRoots(as(pki.RoleReader, "p2"), &cadistv1.ListRootsRequest{PageSize: 1, PageToken: tok})
		require.NoError(t, err)
		for _, r := range resp.GetRoots() {
			seen = append(seen, r.GetMetadata().GetName())
		}
		if tok = resp.GetNextPageToken(); tok == "" {
			break
		}
	}
	require.Equal(t, []string{"common", cadist.InstallationRoot, "root-p2"}, seen)
}

// leafWithDNS is a serving certificate for dnsNames signed by an
// intermediate, as istiod makes its own.
func leafWithDNS(t *testing.T, ca *x509.Certificate, caKeyPEM string, dnsNames ...string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(9), NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: dnsNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, parseSigner(t, caKeyPEM))
	require.NoError(t, err)
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return c
}

// TestIntermediatesPermitOwnDNSNames: an intermediate signs serving
// certificates for its logical cloud's namespaces' services only
// (istiod's own among them), and workload identities of its trust domain;
// not the API server's name nor another tenant's service. A change of
// namespaces issues a new intermediate.
func TestIntermediatesPermitOwnDNSNames(t *testing.T) {
	t.Parallel()
	f := serve(t, cadist.Options{})
	ctx := context.Background()
	const td = "lc1.p1.dcm.local"
	resp, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", td, "c1"))
	require.NoError(t, err)
	b := resp.GetBundles()[0]
	key, err := f.in.GetIntermediate(ctx, &cadistv1.GetIntermediateRequest{Project: "p1", LogicalCloud: "lc1", Cluster: &cadistv1.MeshCluster{Provider: "edge", Cluster: "c1"}})
	require.NoError(t, err)
	ic := parseCert(t, b.GetCaCert())
	verify := func(leaf *x509.Certificate) error {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: certPool(t, b.GetRootCert()), Intermediates: certPool(t, b.GetCertChain())})
		return err
	}
	for _, ok := range [][]string{
		{"istiod-lc1.lc1-istio-system.svc"},
		{"istiod.lc1-istio-system.svc", "istiod-remote.lc1-istio-system.svc", "istio-pilot.lc1-istio-system.svc"},
		{"web.lc1-ns.svc", "web.lc1-ns.svc.cluster.local"},
	} {
		require.NoError(t, verify(leafWithDNS(t, ic, key.GetCaKey(), ok...)), "%v", ok)
	}
	for _, bad := range [][]string{
		{"kubernetes.default.svc"},
		{"istiod.istio-system.svc"},
		{"web.other-ns.svc"},
		{"istiod-lc1.lc1-istio-system.svc", "evil.example.com"},
	} {
		err := verify(leafWithDNS(t, ic, key.GetCaKey(), bad...))
		require.ErrorContains(t, err, "is not permitted by any constraint", "%v", bad)
	}
	require.NoError(t, verify(leafFrom(t, ic, key.GetCaKey(), "spiffe://"+td+"/ns/lc1-ns/sa/default")))

	// The same namespaces keep it; others replace it.
	again, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", td, "c1"))
	require.NoError(t, err)
	require.Equal(t, b.GetSerial(), again.GetBundles()[0].GetSerial())
	req := issueReq("p1", "lc1", "", td, "c1")
	req.Namespaces = []string{"lc1-apps", "lc1-istio-system"}
	moved, err := f.in.IssueIntermediates(ctx, req)
	require.NoError(t, err)
	require.NotEqual(t, b.GetSerial(), moved.GetBundles()[0].GetSerial())
	require.Equal(t, []string{"lc1-apps.svc", "lc1-apps.svc.cluster.local", "lc1-istio-system.svc", "lc1-istio-system.svc.cluster.local"},
		parseCert(t, moved.GetBundles()[0].GetCaCert()).PermittedDNSDomains)

	// Without namespaces there is no intermediate (no unconstrained one).
	req.Namespaces = nil
	_, err = f.in.IssueIntermediates(ctx, req)
	require.Equal(t, codes.InvalidArgument, status.Code(err))
}

// TestPruneRevokedIntermediates: revoked intermediates' records go once
// they are older than the retention, but for the newest of each cluster,
// so a cluster's next intermediate never takes a generation again.
func TestPruneRevokedIntermediates(t *testing.T) {
	t.Parallel()
	clk := newClock()
	f := serve(t, cadist.Options{Now: clk.Now, RevokedRetention: time.Hour})
	ctx := context.Background()
	const td = "lc1.p1.dcm.local"
	_, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", td, "c1", "c2"))
	require.NoError(t, err)
	for range 2 { // each rotation revokes both clusters' and issues the next
		_, err = f.pub.RotateCa(ctx, &cadistv1.RotateCaRequest{Project: "p1", LogicalCloud: "lc1"})
		require.NoError(t, err)
	}
	ids := func() []string {
		got, err := f.svc.IntermediateIDs(ctx)
		require.NoError(t, err)
		return got
	}
	all := []string{
		"p1/lc1/edge/c1/000001", "p1/lc1/edge/c1/000002", "p1/lc1/edge/c1/000003",
		"p1/lc1/edge/c2/000001", "p1/lc1/edge/c2/000002", "p1/lc1/edge/c2/000003",
	}
	require.Equal(t, all, ids())
	n, err := f.svc.PruneRevoked(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "within the retention")
	clk.Add(59 * time.Minute)
	n, err = f.svc.PruneRevoked(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, all, ids())

	clk.Add(2 * time.Minute)
	n, err = f.svc.PruneRevoked(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.Equal(t, []string{"p1/lc1/edge/c1/000003", "p1/lc1/edge/c2/000003"}, ids(), "the live ones stay")

	// Terminated: every one revoked; the newest of each cluster stays.
	_, err = f.in.RevokeIntermediates(ctx, &cadistv1.RevokeIntermediatesRequest{Project: "p1", LogicalCloud: "lc1"})
	require.NoError(t, err)
	clk.Add(2 * time.Hour)
	n, err = f.svc.PruneRevoked(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, []string{"p1/lc1/edge/c1/000003", "p1/lc1/edge/c2/000003"}, ids())
	resp, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", td, "c1"))
	require.NoError(t, err)
	require.Equal(t, []string{"p1/lc1/edge/c1/000003", "p1/lc1/edge/c1/000004", "p1/lc1/edge/c2/000003"}, ids(), "generation 4, not 1 again")
	require.False(t, resp.GetBundles()[0].GetRevoked())
	clk.Add(2 * time.Hour)
	n, err = f.svc.PruneRevoked(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"p1/lc1/edge/c1/000004", "p1/lc1/edge/c2/000003"}, ids())
}
