package rsync_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest"
)

func parseCert(t *testing.T, chain []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(chain)
	require.NotNil(t, block)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

// TestRenewCertificateOnRealClusters: the owner of an issued CSR gets a
// fresh certificate for the same request, which GetCertificate answers
// from then on; no one else may renew it; the renewal request is gone.
func TestRenewCertificateOnRealClusters(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	c := serveWithEngine(t)
	registerHarness(t, c, h)
	ctx := context.Background()
	const name, owner = "dcm.p.renew.alice", "lc/p/renew"
	req, _, err := kube.NewCSR("dcm:p:renew:alice", "dcm:p:renew")
	require.NoError(t, err)
	manifest := kube.CSRManifestWithLifetime(name, req, map[string]string{"dcm.io/project": "p"}, kube.MinCertLifetime)
	kc := h.Clusters[0]
	_, err = c.SubmitRollout(ctx, &rsyncv1.SubmitRolloutRequest{Owner: owner, Clusters: []*rsyncv1.ClusterResources{
		{Provider: "edge", Cluster: kc.Name, Resources: resources(manifest)}}})
	require.NoError(t, err)
	last, _ := settle(t, c, owner)
	require.Equal(t, rsyncv1.State_STATE_APPLIED, last.GetState(), "%v", last)

	got, err := c.GetCertificate(ctx, &rsyncv1.GetCertificateRequest{Provider: "edge", Cluster: kc.Name, Name: name})
	require.NoError(t, err)
	issued := parseCert(t, got.GetCertificate())

	_, err = c.RenewCertificate(ctx, &rsyncv1.RenewCertificateRequest{Owner: "lc/q/other", Provider: "edge", Cluster: kc.Name, Name: name})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "another owner: %v", err)
	_, err = c.RenewCertificate(ctx, &rsyncv1.RenewCertificateRequest{Owner: owner, Provider: "edge", Cluster: kc.Name, Name: "missing"})
	require.Equal(t, codes.NotFound, status.Code(err))
	_, err = c.RenewCertificate(ctx, &rsyncv1.RenewCertificateRequest{Owner: owner, Provider: "edge", Cluster: "nowhere", Name: name})
	require.Equal(t, codes.NotFound, status.Code(err))

	fresh, err := c.RenewCertificate(ctx, &rsyncv1.RenewCertificateRequest{Owner: owner, Provider: "edge", Cluster: kc.Name, Name: name})
	require.NoError(t, err)
	renewed := parseCert(t, fresh.GetCertificate())
	require.NotEqual(t, issued.SerialNumber, renewed.SerialNumber)
	require.Equal(t, issued.Subject.String(), renewed.Subject.String())
	require.Equal(t, issued.PublicKey, renewed.PublicKey, "the same request, so the same key")
	require.False(t, renewed.NotAfter.Before(issued.NotAfter))

	got, err = c.GetCertificate(ctx, &rsyncv1.GetCertificateRequest{Provider: "edge", Cluster: kc.Name, Name: name})
	require.NoError(t, err)
	require.Equal(t, fresh.GetCertificate(), got.GetCertificate(), "GetCertificate answers the fresher one")

	list, err := kubeClient(t, kc).CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, csr := range list.Items {
		require.Empty(t, csr.Annotations["dcm.io/renews"], "renewal request %s left on the cluster", csr.Name)
	}
	_, err = c.DeleteRollout(ctx, &rsyncv1.DeleteRolloutRequest{Owner: owner})
	require.NoError(t, err)
	settle(t, c, owner)
}
