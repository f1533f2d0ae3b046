package user_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// apiServer talks to a cluster's REST API as one client (the admin, or a
// user with its certificate), with no client library: the test sees the
// status codes the cluster answers.
type apiServer struct {
	t      *testing.T
	server string
	client *http.Client
}

func (a apiServer) do(method, path string, body any) (int, []byte) {
	a.t.Helper()
	var r io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			b, err = json.Marshal(body)
			require.NoError(a.t, err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, a.server+path, r)
	require.NoError(a.t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	require.NoError(a.t, err)
	defer func() { require.NoError(a.t, resp.Body.Close()) }()
	out, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	return resp.StatusCode, out
}

// create creates a rendered manifest on the cluster.
func (a apiServer) create(manifest string) {
	a.t.Helper()
	o := decode(a.t, manifest)
	collections := map[string]string{
		"Namespace":                 "/api/v1/namespaces",
		"CertificateSigningRequest": "/apis/certificates.k8s.io/v1/certificatesigningrequests",
		"Role":                      "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/roles",
		"RoleBinding":               "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/rolebindings",
	}
	path, ok := collections[o.Kind]
	require.True(a.t, ok, "the test creates no %s", o.Kind)
	if strings.Contains(path, "%s") {
		path = fmt.Sprintf(path, o.Metadata.Namespace)
	}
	code, body := a.do(http.MethodPost, path, []byte(manifest))
	require.Equal(a.t, http.StatusCreated, code, "create %s %s: %s", o.Kind, o.Metadata.Name, body)
}

// approveAndWait approves CSR name, as the resource synchronizer does, and
// waits for the cluster's signer to issue the certificate.
func (a apiServer) approveAndWait(name string) *x509.Certificate {
	a.t.Helper()
	path := "/apis/certificates.k8s.io/v1/certificatesigningrequests/" + name
	code, body := a.do(http.MethodGet, path, nil)
	require.Equal(a.t, http.StatusOK, code, "%s", body)
	var csr map[string]any
	require.NoError(a.t, json.Unmarshal(body, &csr))
	csr["status"] = map[string]any{"conditions": []map[string]string{
		{"type": "Approved", "status": "True", "reason": "DCMTest", "message": "approved by the test"}}}
	code, body = a.do(http.MethodPut, path+"/approval", csr)
	require.Equal(a.t, http.StatusOK, code, "approve: %s", body)

	var issued struct {
		Status struct {
			Certificate []byte `json:"certificate"`
		} `json:"status"`
	}
	require.Eventually(a.t, func() bool {
		code, body := a.do(http.MethodGet, path, nil)
		require.Equal(a.t, http.StatusOK, code, "%s", body)
		require.NoError(a.t, json.Unmarshal(body, &issued))
		return len(issued.Status.Certificate) > 0
	}, time.Minute, 100*time.Millisecond, "the signer issues %s", name)
	block, _ := pem.Decode(issued.Status.Certificate)
	require.NotNil(a.t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(a.t, err)
	return cert
}

// as is a client of the cluster presenting certPEM and keyPEM.
func (a apiServer) as(c *kubetest.Cluster, certPEM, keyPEM []byte) apiServer {
	a.t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(a.t, err)
	pool := x509.NewCertPool()
	pool.AddCert(c.CA.Cert)
	return apiServer{t: a.t, server: a.server, client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12,
	}}}}
}

// TestIdentityOnRealCluster applies what the user service renders for two
// logical clouds whose dashed names used to collide, project team's x-prod
// and project team-x's prod, each with a user u allowed to list ConfigMaps
// in its namespace, on a real cluster: the signer issues each CSR a
// certificate for the user's identity, valid for the configured lifetime
// (a week for one, 15 minutes for the other); each certificate lists
// ConfigMaps in its own namespace and is Forbidden in the other's.
func TestIdentityOnRealCluster(t *testing.T) {
	h := kubetest.ForTests(t, 1)
	c := h.Clusters[0]
	adminClient, err := c.HTTPClient()
	require.NoError(t, err)
	admin := apiServer{t: t, server: c.Server, client: adminClient}
	ctx := context.Background()

	type tenant struct {
		project, lc, ns string
		lifetime        time.Duration
		api             apiServer // as the tenant's user
	}
	tenants := []*tenant{
		{project: "team", lc: "x-prod", ns: "team-x-prod", lifetime: week},
		{project: "team-x", lc: "prod", ns: "team-x-prod-2", lifetime: 15 * time.Minute},
	}
	for _, tn := range tenants {
		svc, core, _ := serveStoreWith(t, tn.lifetime)
		core.Add(tn.project, tn.lc, kube.LevelStandard, tn.ns)
		_, err := svc.CreateUser(ctx, &userv1.CreateUserRequest{Project: tn.project, LogicalCloud: tn.lc, User: &userv1.User{Name: "u"}})
		require.NoError(t, err)
		_, err = svc.CreateUserPermission(ctx, &userv1.CreateUserPermissionRequest{Project: tn.project, LogicalCloud: tn.lc, UserPermission: &userv1.UserPermission{
			PermissionName: "configmaps", ApiGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}})
		require.NoError(t, err)
		r, err := svc.RenderUsers(ctx, &userv1.RenderUsersRequest{Project: tn.project, LogicalCloud: tn.lc})
		require.NoError(t, err)
		csrName := kube.CSRName(tn.project, tn.lc, "u")
		require.Equal(t, []string{"CertificateSigningRequest " + csrName, "Role " + tn.ns + "/configmaps", "RoleBinding " + tn.ns + "/configmaps"},
			outline(t, tn.project, tn.lc, r.GetManifests()))

		admin.create(kube.Manifest("v1", "Namespace", kube.Meta{Name: tn.ns}, nil))
		for _, m := range r.GetManifests() {
			admin.create(m)
		}
		approved := time.Now()
		cert := admin.approveAndWait(csrName)
		issued := time.Now()

		cn, group := kube.UserIdentity(tn.project, tn.lc, "u")
		require.Equal(t, cn, cert.Subject.CommonName)
		require.Equal(t, []string{group}, cert.Subject.Organization)
		// The signer backdates NotBefore by 5 minutes; it adds those to a
		// lifetime under 8 hours, and takes them from a longer one.
		const backdate = 5 * time.Minute
		validity := tn.lifetime
		if tn.lifetime < 8*time.Hour {
			validity += backdate
		}
		require.Equal(t, validity, cert.NotAfter.Sub(cert.NotBefore), "the lifetime asked for")
		notAfter := func(at time.Time) time.Time { return at.Add(-backdate).Add(validity).Truncate(time.Second) }
		require.WithinRange(t, cert.NotAfter, notAfter(approved).Add(-time.Minute), notAfter(issued).Add(time.Minute),
			"signed between approval and issue, valid for %s", tn.lifetime)

		creds, err := svc.GetUserCredentials(ctx, &userv1.GetUserCredentialsRequest{Project: tn.project, LogicalCloud: tn.lc, Name: "u"})
		require.NoError(t, err)
		tn.api = admin.as(c, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), creds.GetKeyPem())
	}

	for i, tn := range tenants {
		other := tenants[1-i]
		code, body := tn.api.do(http.MethodGet, "/api/v1/namespaces/"+tn.ns+"/configmaps", nil)
		require.Equal(t, http.StatusOK, code, "%s/%s lists its own ConfigMaps: %s", tn.project, tn.lc, body)
		code, body = tn.api.do(http.MethodGet, "/api/v1/namespaces/"+other.ns+"/configmaps", nil)
		require.Equal(t, http.StatusForbidden, code, "%s/%s in %s: %s", tn.project, tn.lc, other.ns, body)
		cn, _ := kube.UserIdentity(tn.project, tn.lc, "u")
		require.Contains(t, string(body), `User \"`+cn+`\" cannot list resource \"configmaps\"`)
		code, body = tn.api.do(http.MethodGet, "/api/v1/namespaces/default/configmaps", nil)
		require.Equal(t, http.StatusForbidden, code, "%s", body)
	}
}
