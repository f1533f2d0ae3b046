package cadist_test

import (
	"context"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/services/cadist/internal/cadist"
)

// rootsOf is the set of certificates a root-cert holds.
func rootsOf(t *testing.T, pemText string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, c := range splitPEM(t, pemText) {
		out[string(c.Raw)] = true
	}
	return out
}

func splitPEM(t *testing.T, pemText string) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	rest := []byte(pemText)
	for len(rest) > 0 {
		c := parseCert(t, string(rest))
		out = append(out, c)
		i := len(certPEMOf(c))
		rest = rest[i:]
	}
	return out
}

func subset(a, b map[string]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// TestRotation: new intermediates for every cluster, the old revoked;
// during the overlap each bundle trusts the new root then the old one,
// after it the new one only, and each step's root bundle is a subset or a
// superset of the one before (what istiod accepts).
func TestRotation(t *testing.T) {
	t.Parallel()
	clk := newClock()
	f := serve(t, cadist.Options{Overlap: time.Hour, Now: clk.Now})
	ctx := context.Background()
	const td = "lc1.p1.dcm.local"
	_, err := f.pub.RotateCa(ctx, &cadistv1.RotateCaRequest{Project: "p1", LogicalCloud: "lc1"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "no mesh, nothing to rotate")
	require.Equal(t, errs.ReasonWrongState, errs.ReasonOf(status.Convert(err)))
	require.Contains(t, err.Error(), "no intermediate CA")

	first, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", td, "c1", "c2"))
	require.NoError(t, err)
	before := rootsOf(t, first.GetBundles()[0].GetRootCert())
	_, ca, key := makeCA(t, caSpec{isCA: true, pathLen: -1, notAfter: time.Now().Add(1000 * time.Hour)})
	_, err = f.pub.CreateRoot(ctx, rootReq("r2", ca, key, "", ""))
	require.NoError(t, err)

	rot, err := f.pub.RotateCa(ctx, &cadistv1.RotateCaRequest{Project: "p1", LogicalCloud: "lc1", Root: "r2"})
	require.NoError(t, err)
	noKey(t, rot)
	require.Equal(t, "r2", rot.GetCa().GetRoot())
	require.Equal(t, cadist.InstallationRoot, rot.GetCa().GetPreviousRoot())
	require.NotEmpty(t, rot.GetCa().GetOverlapUntil())
	require.Len(t, rot.GetBundles(), 2)
	for i, b := range rot.GetBundles() {
		require.Equal(t, "r2", b.GetRoot())
		require.Equal(t, []string{"r2", cadist.InstallationRoot}, b.GetTrustedRoots(), "new first")
		require.NotEqual(t, first.GetBundles()[i].GetSerial(), b.GetSerial())
		roots := splitPEM(t, b.GetRootCert())
		require.Len(t, roots, 2)
		require.Equal(t, ca, certPEMOf(roots[0]), "the new root first")
		got, err := f.pub.GetBundle(ctx, &cadistv1.GetBundleRequest{Project: "p1", LogicalCloud: "lc1", Cluster: b.GetCluster()})
		require.NoError(t, err)
		noKey(t, got)
		require.Equal(t, b.GetSerial(), got.GetBundle().GetSerial(), "the old intermediate is revoked")
		require.Equal(t, b.GetRootCert(), got.GetBundle().GetRootCert())
		live, err := f.in.GetIntermediate(ctx, &cadistv1.GetIntermediateRequest{Project: "p1", LogicalCloud: "lc1",
			Cluster: &cadistv1.MeshCluster{Provider: "edge", Cluster: b.GetCluster()}})
		require.NoError(t, err)
		leaf := leafFrom(t, parseCert(t, b.GetCaCert()), live.GetCaKey(), "spiffe://"+td+"/ns/x/sa/y")
		_, err = leaf.Verify(x509.VerifyOptions{Roots: certPool(t, b.GetRootCert()), Intermediates: certPool(t, b.GetCertChain()), CurrentTime: clk.Now()})
		require.NoError(t, err)
	}
	during := rootsOf(t, rot.GetBundles()[0].GetRootCert())
	require.True(t, subset(before, during), "old root bundle within the overlap's")

	// The service mesh service's next update keeps the rotated root.
	again, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", td, "c1", "c2"))
	require.NoError(t, err)
	require.Equal(t, rot.GetBundles()[0].GetSerial(), again.GetBundles()[0].GetSerial())
	require.Equal(t, rot.GetBundles()[0].GetRootCert(), again.GetBundles()[0].GetRootCert())

	// A third root inside the overlap is refused, by RotateCa and by
	// spec.ca-root alike; new keys are not.
	_, ca3, key3 := makeCA(t, caSpec{isCA: true, pathLen: -1})
	_, err = f.pub.CreateRoot(ctx, rootReq("r3", ca3, key3, "", ""))
	require.NoError(t, err)
	_, err = f.pub.RotateCa(ctx, &cadistv1.RotateCaRequest{Project: "p1", LogicalCloud: "lc1", Root: "r3"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Equal(t, "root", fieldOf(err))
	_, err = f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "r3", td, "c1"))
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Equal(t, "root", fieldOf(err))
	rekeyed, err := f.pub.RotateCa(ctx, &cadistv1.RotateCaRequest{Project: "p1", LogicalCloud: "lc1"})
	require.NoError(t, err)
	require.Equal(t, "r2", rekeyed.GetBundles()[0].GetRoot())
	require.NotEqual(t, rot.GetBundles()[0].GetSerial(), rekeyed.GetBundles()[0].GetSerial())
	require.Len(t, rekeyed.GetBundles()[0].GetTrustedRoots(), 2, "still in the overlap")

	// After the overlap, the old root leaves on the next read.
	clk.Add(time.Hour + time.Minute)
	after, err := f.pub.GetBundle(ctx, &cadistv1.GetBundleRequest{Project: "p1", LogicalCloud: "lc1", Cluster: "c1", ClusterProvider: "edge"})
	require.NoError(t, err)
	require.Equal(t, []string{"r2"}, after.GetBundle().GetTrustedRoots())
	require.Equal(t, ca, after.GetBundle().GetRootCert())
	require.True(t, subset(rootsOf(t, after.GetBundle().GetRootCert()), during), "the new root bundle within the overlap's")
	issued, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", td, "c1"))
	require.NoError(t, err)
	require.Equal(t, []string{"r2"}, issued.GetBundles()[0].GetTrustedRoots())

	// The cluster's name alone is ambiguous once two providers hold it.
	_, err = f.in.IssueIntermediates(ctx, &cadistv1.IssueIntermediatesRequest{Project: "p1", LogicalCloud: "lc1", TrustDomain: td,
		Clusters: []*cadistv1.MeshCluster{{Provider: "core", Cluster: "c1"}}, Namespaces: []string{"lc1-ns"}})
	require.NoError(t, err)
	_, err = f.pub.GetBundle(ctx, &cadistv1.GetBundleRequest{Project: "p1", LogicalCloud: "lc1", Cluster: "c1"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Equal(t, "cluster-provider", fieldOf(err))
	got, err := f.pub.GetBundle(ctx, &cadistv1.GetBundleRequest{Project: "p1", LogicalCloud: "lc1", Cluster: "c1", ClusterProvider: "core"})
	require.NoError(t, err)
	require.Equal(t, "core", got.GetBundle().GetClusterProvider())
}

// TestRotateAgainstSpecRoot: a logical cloud naming its root
// (spec.ca-root) rotates to another one by changing it, not by RotateCa.
func TestRotateAgainstSpecRoot(t *testing.T) {
	t.Parallel()
	f := serve(t, cadist.Options{})
	ctx := context.Background()
	for _, n := range []string{"ra", "rb"} {
		_, ca, key := makeCA(t, caSpec{isCA: true, pathLen: -1})
		_, err := f.pub.CreateRoot(ctx, rootReq(n, ca, key, "", ""))
		require.NoError(t, err)
	}
	_, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "ra", "td.local", "c1"))
	require.NoError(t, err)
	_, err = f.pub.RotateCa(ctx, &cadistv1.RotateCaRequest{Project: "p1", LogicalCloud: "lc1", Root: "rb"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Equal(t, "root", fieldOf(err))
	_, err = f.pub.RotateCa(ctx, &cadistv1.RotateCaRequest{Project: "p1", LogicalCloud: "lc1", Root: "nope"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))

	// spec.ca-root changed: the intermediate is replaced, with an overlap.
	moved, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "rb", "td.local", "c1"))
	require.NoError(t, err)
	require.Equal(t, []string{"rb", "ra"}, moved.GetBundles()[0].GetTrustedRoots())

	// Back to the previous root inside the overlap: the same two trusted.
	back, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "ra", "td.local", "c1"))
	require.NoError(t, err)
	require.Equal(t, []string{"ra", "rb"}, back.GetBundles()[0].GetTrustedRoots())
	require.Equal(t, rootsOf(t, moved.GetBundles()[0].GetRootCert()), rootsOf(t, back.GetBundles()[0].GetRootCert()))
}
