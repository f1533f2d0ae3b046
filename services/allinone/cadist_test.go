package allinone_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// getTyped answers a GET's status, content type and body.
func getTyped(t *testing.T, c *http.Client, url string) (int, string, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// TestCADistribution: through REST, a root generated off the request path,
// its certificate as PEM, the bundle of an intermediate the service mesh
// service issued over gRPC, and a rotation; the intermediate's key goes to
// the service mesh service's identity only, never to an admin, the
// gateway or core, and never over REST.
func TestCADistribution(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	ctx := context.Background()

	code, b := apitest.Call(t, s.Admin, "POST", s.URL+"/v2/cadist/roots", `{"metadata":{"name":"r1"},"projects":["p1"]}`)
	require.Equal(t, 201, code, "%s", b)
	require.Equal(t, "generating", decode(t, b).(map[string]any)["state"])
	var root map[string]any
	require.Eventually(t, func() bool {
		code, b := apitest.Call(t, s.Admin, "GET", s.URL+"/v2/cadist/roots/r1", "")
		require.Equal(t, 200, code, "%s", b)
		root = decode(t, b).(map[string]any)
		return root["state"] == "ready"
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, "ecdsa-p256", root["key-type"])
	require.Equal(t, true, root["hasPrivateKey"])
	require.NotEmpty(t, root["not-after"])
	code, ctype, pemBody := getTyped(t, s.Admin, s.URL+"/v2/cadist/roots/r1/certificate")
	require.Equal(t, 200, code, "%s", pemBody)
	require.Equal(t, "application/x-pem-file", ctype)
	require.Equal(t, root["certificate"], string(pemBody))
	block, _ := pem.Decode(pemBody)
	require.NotNil(t, block)
	rootCert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.True(t, rootCert.IsCA)

	code, b = apitest.Call(t, s.Admin, "POST", s.URL+"/v2/cadist/roots", `{"metadata":{"name":"bad"},"certificate":"not pem"}`)
	require.Equal(t, 400, code)
	require.Equal(t, "certificate", decode(t, b).(map[string]any)["field"])
	require.Equal(t, 404, first(apitest.Call(t, s.Admin, "GET", s.URL+"/v2/cadist/roots/bad", "")), "nothing stored")

	dial := func(creds grpc.DialOption) *grpc.ClientConn {
		conn, err := grpc.NewClient(s.GRPC, creds)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	year := time.Now().Add(365 * 24 * time.Hour)
	as := func(subject string) *grpc.ClientConn {
		return dial(certCreds(t, s, s.Issue(t, pki.Identity{Subject: subject, Role: pki.RoleService}, year)))
	}
	mesh := cadistv1.NewCaDistInternalServiceClient(as("servicemesh"))
	issued, err := mesh.IssueIntermediates(ctx, &cadistv1.IssueIntermediatesRequest{Project: "p1", LogicalCloud: "lc1", // no spec.ca-root: p1's default root, r1
		TrustDomain: "lc1.p1.dcm.local", Clusters: []*cadistv1.MeshCluster{{Provider: "edge", Cluster: "c1"}}, Namespaces: []string{"lc1"}})
	require.NoError(t, err)
	getKey := &cadistv1.GetIntermediateRequest{Project: "p1", LogicalCloud: "lc1", Cluster: &cadistv1.MeshCluster{Provider: "edge", Cluster: "c1"}}
	withKey, err := mesh.GetIntermediate(ctx, getKey)
	require.NoError(t, err, "the service mesh service gets the key")
	_, err = tls.X509KeyPair([]byte(withKey.GetBundle().GetCaCert()), []byte(withKey.GetCaKey()))
	require.NoError(t, err)
	for name, conn := range map[string]*grpc.ClientConn{"admin": dial(adminCreds(t, s)), "gateway": as("gateway"), "core": as("core")} {
		_, err := cadistv1.NewCaDistInternalServiceClient(conn).GetIntermediate(ctx, getKey)
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%s gets no intermediate key: %v", name, err)
	}
	_, err = cadistv1.NewCaDistInternalServiceClient(dial(adminCreds(t, s))).IssueIntermediates(ctx, &cadistv1.IssueIntermediatesRequest{})
	require.Equal(t, codes.PermissionDenied, status.Code(err))

	bundleURL := s.URL + "/v1/cadist/projects/p1/logicalclouds/lc1/clusters/c1"
	code, b = apitest.Call(t, s.Admin, "GET", bundleURL, "")
	require.Equal(t, 200, code, "%s", b)
	require.NotContains(t, string(b), "PRIVATE KEY")
	bundle := decode(t, b).(map[string]any)
	want := issued.GetBundles()[0]
	require.Equal(t, want.GetCaCert(), bundle["ca-cert"])
	require.Equal(t, want.GetCertChain(), bundle["cert-chain"])
	require.Equal(t, string(pemBody), bundle["root-cert"])
	require.Equal(t, "/v2/cadist/roots/r1/certificate", bundle["root-cert-url"])
	require.Equal(t, want.GetSerial(), bundle["serial"])
	require.Equal(t, want.GetNotAfter(), bundle["not-after"])
	require.Equal(t, []any{"r1"}, bundle["trusted-roots"])
	require.Equal(t, "edge", bundle["cluster-provider"])
	code, _, fromURL := getTyped(t, s.Admin, s.URL+bundle["root-cert-url"].(string))
	require.Equal(t, 200, code)
	require.Equal(t, bundle["root-cert"], string(fromURL))
	require.Equal(t, 200, first(apitest.Call(t, s.Admin, "GET", bundleURL+"?cluster-provider=edge", "")))
	require.Equal(t, 404, first(apitest.Call(t, s.Admin, "GET", bundleURL+"?cluster-provider=other", "")))

	// A project's admin reads its own bundles only.
	p1Admin := s.Issue(t, pki.Identity{Subject: "alice", Role: pki.RoleProjectAdmin, Project: "p1"}, year)
	p2Admin := s.Issue(t, pki.Identity{Subject: "bob", Role: pki.RoleProjectAdmin, Project: "p2"}, year)
	require.Equal(t, 200, first(apitest.Call(t, s.Client(&p1Admin), "GET", bundleURL, "")))
	require.Equal(t, 403, first(apitest.Call(t, s.Client(&p2Admin), "GET", bundleURL, "")))

	// Rotation to a second root: both trusted, the new one first.
	require.Equal(t, 201, first(apitest.Call(t, s.Admin, "POST", s.URL+"/v2/cadist/roots", `{"metadata":{"name":"r2"},"shared":true}`)))
	require.Eventually(t, func() bool {
		_, b := apitest.Call(t, s.Admin, "GET", s.URL+"/v2/cadist/roots/r2", "")
		return decode(t, b).(map[string]any)["state"] == "ready"
	}, 30*time.Second, 50*time.Millisecond)
	rotateURL := s.URL + "/v2/projects/p1/logical-clouds/lc1/ca/rotate"
	code, b = apitest.Call(t, s.Client(&p2Admin), "POST", rotateURL, `{"root":"r2"}`)
	require.Equal(t, 403, code, "%s", b)
	code, b = apitest.Call(t, s.Admin, "POST", rotateURL, `{"root":"nope"}`)
	require.Equal(t, 400, code, "%s", b)
	require.Equal(t, "root", decode(t, b).(map[string]any)["field"])
	code, b = apitest.Call(t, s.Client(&p1Admin), "POST", rotateURL, `{"root":"r2"}`)
	require.Equal(t, 200, code, "%s", b)
	require.NotContains(t, string(b), "PRIVATE KEY")
	rotated := decode(t, b).(map[string]any)
	require.Equal(t, "r2", rotated["ca"].(map[string]any)["root"])
	require.Equal(t, "r1", rotated["ca"].(map[string]any)["previous-root"])
	code, b = apitest.Call(t, s.Admin, "GET", bundleURL, "")
	require.Equal(t, 200, code)
	bundle = decode(t, b).(map[string]any)
	require.Equal(t, []any{"r2", "r1"}, bundle["trusted-roots"])
	require.NotEqual(t, want.GetSerial(), bundle["serial"])
	code, b = apitest.Call(t, s.Admin, "POST", s.URL+"/v2/projects/p1/logical-clouds/no-mesh/ca/rotate", `{}`)
	require.Equal(t, 409, code, "%s", b)
	require.Equal(t, 409, first(apitest.Call(t, s.Admin, "DELETE", s.URL+"/v2/cadist/roots/r2", "")), "r2 signs a live intermediate")

	// Core purges a deleted logical cloud's intermediates; the service mesh service may not.
	purge := &cadistv1.PurgeLogicalCloudRequest{Project: "p1", LogicalCloud: "lc1"}
	_, err = mesh.PurgeLogicalCloud(ctx, purge)
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	_, err = cadistv1.NewCaDistInternalServiceClient(as("core")).PurgeLogicalCloud(ctx, purge)
	require.NoError(t, err)
	require.Equal(t, 404, first(apitest.Call(t, s.Admin, "GET", bundleURL, "")))
}
