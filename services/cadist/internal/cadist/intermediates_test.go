package cadist_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/services/cadist/internal/cadist"
)

var oidNameConstraints = asn1.ObjectIdentifier{2, 5, 29, 30}

func issueReq(project, lc, root, td string, clusters ...string) *cadistv1.IssueIntermediatesRequest {
	req := &cadistv1.IssueIntermediatesRequest{Project: project, LogicalCloud: lc, Root: root, TrustDomain: td,
		Namespaces: []string{lc + "-ns", lc + "-istio-system"}}
	for _, c := range clusters {
		req.Clusters = append(req.Clusters, &cadistv1.MeshCluster{Provider: "edge", Cluster: c})
	}
	return req
}

// TestIssueIntermediates: one intermediate per cluster from the
// installation's root (made on first use); the chain verifies root ->
// intermediate -> a workload in the trust domain, and refuses one outside
// it; path length 0, no EKU, a critical URI constraint; unique serials;
// idempotent; the key only from GetIntermediate.
func TestIssueIntermediates(t *testing.T) {
	t.Parallel()
	f := serve(t, cadist.Options{IntermediateLifetime: 48 * time.Hour})
	ctx := context.Background()
	const td = "lc1.p1.dcm.local"
	resp, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", td, "c1", "c2"))
	require.NoError(t, err)
	require.Len(t, resp.GetBundles(), 2)
	serials := map[string]bool{}
	for i, b := range resp.GetBundles() {
		require.Equal(t, []string{"c1", "c2"}[i], b.GetCluster())
		require.Equal(t, "edge", b.GetClusterProvider())
		require.Equal(t, cadist.InstallationRoot, b.GetRoot())
		require.Equal(t, []string{cadist.InstallationRoot}, b.GetTrustedRoots())
		require.Equal(t, "/v2/cadist/roots/dcm-mesh-root/certificate", b.GetRootCertUrl())
		require.Equal(t, td, b.GetTrustDomain())
		require.False(t, b.GetRevoked())
		ic := parseCert(t, b.GetCaCert())
		require.Equal(t, b.GetSerial(), ic.SerialNumber.Text(16))
		require.False(t, serials[b.GetSerial()], "serials are unique")
		serials[b.GetSerial()] = true
		require.True(t, ic.IsCA)
		require.Equal(t, 0, ic.MaxPathLen)
		require.True(t, ic.MaxPathLenZero)
		require.Empty(t, ic.ExtKeyUsage, "no EKU on an intermediate (docs/mesh.md section 4)")
		require.Equal(t, x509.KeyUsageCertSign|x509.KeyUsageCRLSign|x509.KeyUsageDigitalSignature, ic.KeyUsage)
		require.Equal(t, []string{td}, ic.PermittedURIDomains)
		require.Equal(t, []string{"lc1-istio-system.svc", "lc1-istio-system.svc.cluster.local", "lc1-ns.svc", "lc1-ns.svc.cluster.local"},
			ic.PermittedDNSDomains, "DNS names of the logical cloud's namespaces only")
		critical := false
		for _, e := range ic.Extensions {
			if e.Id.Equal(oidNameConstraints) {
				critical = e.Critical
			}
		}
		require.True(t, critical, "name constraints are critical")
		require.WithinDuration(t, time.Now().Add(48*time.Hour), ic.NotAfter, time.Minute)
		require.Equal(t, ic.NotAfter.UTC().Format(time.RFC3339), b.GetNotAfter())
		require.Equal(t, []string{"p1", "lc1", "edge"}, ic.Subject.OrganizationalUnit)
		require.Equal(t, b.GetCluster(), ic.Subject.CommonName)
		root := parseCert(t, b.GetRootCert())
		require.True(t, root.IsCA)
		require.True(t, root.MaxPathLen >= 1 || root.MaxPathLen == -1, "a root signs intermediates that sign workloads")
		require.Equal(t, b.GetCaCert()+b.GetRootCert(), b.GetCertChain())

		got, err := f.in.GetIntermediate(ctx, &cadistv1.GetIntermediateRequest{Project: "p1", LogicalCloud: "lc1",
			Cluster: &cadistv1.MeshCluster{Provider: "edge", Cluster: b.GetCluster()}})
		require.NoError(t, err)
		require.Equal(t, b.GetCaCert(), got.GetBundle().GetCaCert())
		_, err = tls.X509KeyPair([]byte(b.GetCaCert()), []byte(got.GetCaKey()))
		require.NoError(t, err, "ca-key is the intermediate's key")

		opts := x509.VerifyOptions{Roots: certPool(t, b.GetRootCert()), Intermediates: certPool(t, b.GetCertChain())}
		_, err = ic.Verify(opts) // Go's default usage, serverAuth: what istiod's util.Verify checks
		require.NoError(t, err)
		leaf := leafFrom(t, ic, got.GetCaKey(), "spiffe://"+td+"/ns/lc1-ns/sa/default")
		_, err = leaf.Verify(opts)
		require.NoError(t, err, "a workload in the trust domain verifies")
		other := leafFrom(t, ic, got.GetCaKey(), "spiffe://lc2.p2.dcm.local/ns/x/sa/y")
		_, err = other.Verify(opts)
		require.ErrorContains(t, err, "not permitted", "the name constraint refuses another trust domain")
	}

	again, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", td, "c2", "c1", "c3"))
	require.NoError(t, err)
	require.Equal(t, resp.GetBundles()[1].GetSerial(), again.GetBundles()[0].GetSerial(), "idempotent")
	require.Equal(t, resp.GetBundles()[0].GetSerial(), again.GetBundles()[1].GetSerial(), "idempotent")
	require.False(t, serials[again.GetBundles()[2].GetSerial()])

	// A new trust domain replaces the intermediates (the constraint changes).
	moved, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", "other.p1.dcm.local", "c1"))
	require.NoError(t, err)
	require.NotEqual(t, resp.GetBundles()[0].GetSerial(), moved.GetBundles()[0].GetSerial())
	require.Equal(t, []string{"other.p1.dcm.local"}, parseCert(t, moved.GetBundles()[0].GetCaCert()).PermittedURIDomains)

	// Another logical cloud, same root: a different intermediate.
	lc2, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc2", "", "lc2.p1.dcm.local", "c1"))
	require.NoError(t, err)
	require.NotEqual(t, moved.GetBundles()[0].GetCaCert(), lc2.GetBundles()[0].GetCaCert())

	// Revoke: kept as records, never answered as live again.
	rev, err := f.in.RevokeIntermediates(ctx, &cadistv1.RevokeIntermediatesRequest{Project: "p1", LogicalCloud: "lc1",
		Clusters: []*cadistv1.MeshCluster{{Provider: "edge", Cluster: "c1"}}})
	require.NoError(t, err)
	require.EqualValues(t, 1, rev.GetRevoked())
	_, err = f.in.GetIntermediate(ctx, &cadistv1.GetIntermediateRequest{Project: "p1", LogicalCloud: "lc1",
		Cluster: &cadistv1.MeshCluster{Provider: "edge", Cluster: "c1"}})
	require.Equal(t, codes.NotFound, status.Code(err))
	reissued, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", "other.p1.dcm.local", "c1"))
	require.NoError(t, err)
	require.NotEqual(t, moved.GetBundles()[0].GetSerial(), reissued.GetBundles()[0].GetSerial(), "a revoked intermediate is not reused")
	rev, err = f.in.RevokeIntermediates(ctx, &cadistv1.RevokeIntermediatesRequest{Project: "p1", LogicalCloud: "lc1"})
	require.NoError(t, err)
	require.EqualValues(t, 3, rev.GetRevoked(), "c1, c2, c3")

	_, err = f.in.PurgeLogicalCloud(ctx, &cadistv1.PurgeLogicalCloudRequest{Project: "p1", LogicalCloud: "lc2"})
	require.NoError(t, err)
	_, err = f.in.PurgeLogicalCloud(ctx, &cadistv1.PurgeLogicalCloudRequest{Project: "p1", LogicalCloud: "lc2"})
	require.NoError(t, err, "rerunning a purge is harmless")
	_, err = f.pub.GetBundle(ctx, &cadistv1.GetBundleRequest{Project: "p1", LogicalCloud: "lc2", Cluster: "c1"})
	require.Equal(t, codes.NotFound, status.Code(err))
}

// TestIssueErrors: bad input names its field; a root that cannot sign yet
// is a conflict.
func TestIssueErrors(t *testing.T) {
	t.Parallel()
	f := serve(t, cadist.Options{})
	ctx := context.Background()
	_, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "nope", "td.local", "c1"))
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Equal(t, "root", fieldOf(err))
	_, err = f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", "Not A/Domain", "c1"))
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Equal(t, "trust-domain", fieldOf(err))
	_, err = f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", "td.local"))
	require.Equal(t, codes.InvalidArgument, status.Code(err), "no clusters")

	// Imported without its key: cannot sign.
	_, certText, _ := makeCA(t, caSpec{isCA: true, pathLen: -1})
	_, err = f.pub.CreateRoot(ctx, &cadistv1.CreateRootRequest{Root: &cadistv1.Root{Metadata: &typesv1.Metadata{Name: "nokey"}, Certificate: certText}})
	require.NoError(t, err)
	_, err = f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "nokey", "td.local", "c1"))
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Equal(t, "root", fieldOf(err))
}

// TestIntermediateLifetimeCapped: an intermediate never outlives its root.
func TestIntermediateLifetimeCapped(t *testing.T) {
	t.Parallel()
	f := serve(t, cadist.Options{})
	ctx := context.Background()
	rootCert, certText, keyText := makeCA(t, caSpec{isCA: true, pathLen: 1, notAfter: time.Now().Add(2 * time.Hour)})
	_, err := f.pub.CreateRoot(ctx, &cadistv1.CreateRootRequest{Root: &cadistv1.Root{Metadata: &typesv1.Metadata{Name: "short"},
		Certificate: certText, PrivateKey: keyText, Projects: []string{"p1"}}})
	require.NoError(t, err)
	resp, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "short", "td.local", "c1"))
	require.NoError(t, err)
	ic := parseCert(t, resp.GetBundles()[0].GetCaCert())
	require.True(t, ic.NotAfter.Equal(rootCert.NotAfter), "capped at the root's expiry: %s vs %s", ic.NotAfter, rootCert.NotAfter)
	require.Equal(t, "short", resp.GetBundles()[0].GetRoot())
}

// TestIntermediateRenewal: past two thirds of its life, the next issue
// replaces an intermediate; before, it is kept.
func TestIntermediateRenewal(t *testing.T) {
	t.Parallel()
	clk := newClock()
	f := serve(t, cadist.Options{IntermediateLifetime: 30 * time.Hour, Now: clk.Now})
	ctx := context.Background()
	first, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", "td.local", "c1"))
	require.NoError(t, err)
	clk.Add(19 * time.Hour)
	kept, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", "td.local", "c1"))
	require.NoError(t, err)
	require.Equal(t, first.GetBundles()[0].GetSerial(), kept.GetBundles()[0].GetSerial())
	clk.Add(2 * time.Hour)
	renewed, err := f.in.IssueIntermediates(ctx, issueReq("p1", "lc1", "", "td.local", "c1"))
	require.NoError(t, err)
	require.NotEqual(t, first.GetBundles()[0].GetSerial(), renewed.GetBundles()[0].GetSerial())
	require.WithinDuration(t, clk.Now().Add(30*time.Hour), parseCert(t, renewed.GetBundles()[0].GetCaCert()).NotAfter, 2*time.Minute)
}
