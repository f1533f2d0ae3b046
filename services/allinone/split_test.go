package allinone_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/core"
	"github.com/dcm-project/dcm/services/gateway"
	"github.com/dcm-project/dcm/services/quota"
	"github.com/dcm-project/dcm/services/rsync"
	"github.com/dcm-project/dcm/services/user"
)

// split is the suite run as separate programs, each with its own name
// and so its own certificate from the shared local PKI.
type split struct {
	data   string
	addrs  map[string]string // gRPC address by program name
	gwURL  string
	client *http.Client // the admin certificate's
	ca     *pki.CA
}

// startSplit starts every service as its own program on loopback
// addresses, all on one data dir (one local PKI, one keyring), sharing the
// embedded store of the first one through its URI, and the gateway in
// front. They stop in reverse order when the test ends.
func startSplit(t *testing.T) *split {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the whole suite as separate programs: not in -short (make test-unit)")
	}
	s := &split{data: t.TempDir(), addrs: map[string]string{}}
	addrs := loopbackAddrs(t, nil)
	for name, a := range addrs {
		s.addrs[name] = a[0]
	}
	ps := newProgramSet(t)
	common := slices.Concat([]string{"-data-dir", s.data}, peerFlags(addrs))
	var storeArgs []string
	if uri := os.Getenv("DCM_TEST_MONGO_URI"); uri != "" {
		storeArgs = []string{"-mongo-database", fmt.Sprintf("dcmsplit_%d", time.Now().UnixNano())}
		storeArgs = append(storeArgs, "-mongo-uri-file", writeSecret(t, uri))
	}
	for i, p := range servicePrograms { // rsync first: it runs the embedded store
		prog, _ := ps.start(p.name, p.build, true, slices.Concat(common, []string{"-grpc-addr", s.addrs[p.name]}, storeArgs)...)
		if i == 0 && storeArgs == nil {
			storeArgs = []string{"-mongo-uri-file", writeSecret(t, prog.Env.Store.ClientURI())}
		}
	}
	gw, _ := ps.start(gateway.Name, gateway.Build, false, slices.Concat([]string{"-data-dir", s.data}, gatewayFlags(addrs), []string{"-grpc-addr", "", "-http-addr", "127.0.0.1:0"})...)
	s.gwURL = "https://" + gw.Server.HTTPAddr()

	dir := filepath.Join(s.data, "pki")
	var err error
	s.ca, err = pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
	require.NoError(t, err)
	s.client = adminClient(t, dir, gw.Env.TLS.Pool())
	return s
}

// writeSecret writes a secret (a store URI) to a file of the test's, 0600,
// for a -...-file flag: secrets are never flags.
func writeSecret(t *testing.T, v string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(f, []byte(v), 0o600))
	return f
}

// dialAs connects to a program's gRPC endpoint with the certificate the
// local PKI issued to the program named as.
func (s *split) dialAs(t *testing.T, program, as string) *grpc.ClientConn {
	t.Helper()
	m, err := pki.Load(pki.ProgramFiles(filepath.Join(s.data, "pki"), as))
	require.NoError(t, err)
	conn, err := client.Dial(s.addrs[program], m)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestSplitPrograms: with every service its own program, each with its own
// certificate (CN its name), the allow-lists admit every call a REST
// sequence makes through the gateway (projects, clusters, a logical cloud
// with its user, namespace, permissions and quotas, cluster references,
// tokens, key rotation, deletion), and still refuse the gateway's
// identity what is core's.
func TestSplitPrograms(t *testing.T) {
	t.Parallel()
	s := startSplit(t)
	r := &apitest.REST{T: t, C: s.client, Base: s.gwURL}

	// Each program is who its certificate says.
	for _, name := range []string{core.Name, user.Name, rsync.Name, gateway.Name} {
		m, err := pki.Load(pki.ProgramFiles(filepath.Join(s.data, "pki"), name))
		require.NoError(t, err)
		require.Equal(t, name, m.Identity().Subject)
	}

	// Clusters (gateway -> rsync), a project (gateway -> core).
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
	kc, _ := kubeconfig(t, s.ca, "https://127.0.0.1:1") // never dialed
	body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": "c1"}, "spec": map[string]any{"kubeconfig": kc, "labels": []string{"edge"}}})
	require.NoError(t, err)
	r.Want(201, "POST", "/v2/cluster-providers/edge/clusters", string(body))
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)

	// A logical cloud: core -> namespace, user (internal and permissions), quota.
	lc := "/v2/projects/p1/logical-clouds/lc-1"
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", lc1)
	r.Want(200, "GET", lc, "")
	// namespace -> core (GetLogicalCloud, ListClusterReferences).
	r.Is(200, "GET", lc+"/namespaces", "", `{"clusters":[],"namespaces":[{"name":"ns-1","labels":{"dcm.io/project":"p1","dcm.io/logical-cloud":"lc-1"}}]}`)
	r.Want(200, "GET", lc+"/users", "")
	// References: core -> rsync (holds).
	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"c1"}`)
	r.Is(200, "GET", lc+"/namespaces", "", `{"clusters":["edge/c1"],"namespaces":[{"name":"ns-1","labels":{"dcm.io/project":"p1","dcm.io/logical-cloud":"lc-1"}}]}`)
	r.Want(409, "DELETE", "/v2/cluster-providers/edge/clusters/c1", "")
	// user -> core, quota -> core.
	r.Want(201, "POST", lc+"/user-permissions", `{"permission-name":"permission-3","apiGroups":["apps"],"resources":["deployments"],"verbs":["get"]}`)
	r.Want(200, "GET", lc+"/user-permissions/permission-3", "")
	r.Want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"q1"},"spec":{"cpu":"4"}}`)
	r.Want(200, "GET", lc+"/cluster-quotas/q1", "")
	// The CA roots (gateway -> cadist).
	r.Want(200, "GET", "/v2/cadist/roots", "")

	// A token (gateway -> core's AuthService, then Authenticate per request).
	code, b := apitest.Call(t, s.client, "POST", s.gwURL+"/v2/auth/tokens", `{"subject":"alice","role":"reader","project":"p1"}`)
	require.Equal(t, 201, code, "%s", b)
	tok, _ := decode(t, b).(map[string]any)["token"].(string)
	require.NotEmpty(t, tok)
	code, b = do(t, &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS12, RootCAs: s.client.Transport.(*http.Transport).TLSClientConfig.RootCAs}}}, tok, "GET", s.gwURL+lc, "")
	require.Equal(t, 200, code, "%s", b)

	// Key rotation: gateway -> every program's KeyService.
	r.Want(200, "POST", "/v2/admin/keys/rewrap", `{}`)

	// The gateway's own identity reaches none of core's: not the users'
	// private keys. Core's does.
	ctx := context.Background()
	req := &userv1.GetUserCredentialsRequest{Project: "p1", LogicalCloud: "lc-1", Name: "user-1"}
	_, err = userv1.NewUserInternalServiceClient(s.dialAs(t, user.Name, gateway.Name)).GetUserCredentials(ctx, req)
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	_, err = userv1.NewUserInternalServiceClient(s.dialAs(t, user.Name, core.Name)).GetUserCredentials(ctx, req)
	require.NotEqual(t, codes.PermissionDenied, status.Code(err), "%v", err)
	_, err = userv1.NewUserServiceClient(s.dialAs(t, user.Name, quota.Name)).ListUsers(ctx, &userv1.ListUsersRequest{Project: "p1", LogicalCloud: "lc-1"})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "one service is not another's caller unless named: %v", err)

	// Deletion: core -> namespace, user, quota purges and rsync releases.
	r.Want(204, "DELETE", lc+"/cluster-providers/edge/cluster-references/c1", "")
	r.Want(204, "DELETE", lc, "")
	require.Eventually(t, func() bool {
		code, _ := apitest.Call(t, s.client, "GET", s.gwURL+lc, "")
		return code == 404
	}, 30*time.Second, 100*time.Millisecond)
	r.Want(204, "DELETE", "/v2/cluster-providers/edge/clusters/c1", "")
}
