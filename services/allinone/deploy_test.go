package allinone_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/core"
	"github.com/dcm-project/dcm/services/gateway"
)

// TestDevOverlayTopology runs the programs as deploy/overlays/dev does
// (docs/deploy.md): each program its own data directory, so its own
// embedded store and its own keyring made at first start, and no shared
// store at all; the certificates given as files from one CA, as
// cert-manager mounts them. A REST sequence through the gateway that
// reaches every service works: the services keep disjoint records.
// deploy/test checks the manifests themselves.
func TestDevOverlayTopology(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts the whole suite as separate programs: not in -short (make test-unit)")
	}
	dir := filepath.Join(t.TempDir(), "pki") // the CA cert-manager stands for
	hosts := pki.DefaultHosts()
	_, err := pki.Bootstrap(dir, hosts)
	require.NoError(t, err)
	addrs := loopbackAddrs(t, nil)
	ps := newProgramSet(t)
	start := func(name string, build app.Build, needStore bool, args ...string) *app.Program {
		t.Helper()
		require.NoError(t, pki.IssueProgram(dir, name, hosts))
		f := pki.ProgramFiles(dir, name)
		p, _ := ps.start(name, build, needStore, slices.Concat([]string{"-data-dir", t.TempDir(),
			"-tls-ca-file", f.CA, "-tls-cert-file", f.Cert, "-tls-key-file", f.Key}, peerFlags(addrs), args)...)
		return p
	}
	for _, p := range servicePrograms {
		prog := start(p.name, p.build, true, "-grpc-addr", addrs[p.name][0])
		require.Empty(t, prog.Env.Config.MongoURIFile, "%s: its own embedded store", p.name)
	}
	f := pki.ProgramFiles(dir, gateway.Name)
	gw := start(gateway.Name, gateway.Build, false, "-grpc-addr", "", "-core-addr", strings.Join(addrs[core.Name], ","), "-http-addr", "127.0.0.1:0",
		"-http-tls-cert-file", f.HTTPCert, "-http-tls-key-file", f.HTTPKey)
	client := adminClient(t, dir, gw.Env.TLS.Pool())
	r := &apitest.REST{T: t, C: client, Base: "https://" + gw.Server.HTTPAddr()}

	// Clusters (rsync), a project (core), a logical cloud with its
	// namespace, users, permissions and quota (core, namespace, user,
	// quota, each reading core), a reference (core -> rsync), CA roots
	// (cadist), a token (core's AuthService), a rewrap (every program).
	ca, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
	require.NoError(t, err)
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
	kc, _ := kubeconfig(t, ca, "https://127.0.0.1:1") // never dialed
	body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": "c1"}, "spec": map[string]any{"kubeconfig": kc, "labels": []string{"edge"}}})
	require.NoError(t, err)
	r.Want(201, "POST", "/v2/cluster-providers/edge/clusters", string(body))
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	lc := "/v2/projects/p1/logical-clouds/lc-1"
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", lc1)
	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"c1"}`)
	r.Is(200, "GET", lc+"/namespaces", "", `{"clusters":["edge/c1"],"namespaces":[{"name":"ns-1","labels":{"dcm.io/project":"p1","dcm.io/logical-cloud":"lc-1"}}]}`)
	r.Want(200, "GET", lc+"/users", "")
	r.Want(201, "POST", lc+"/user-permissions", `{"permission-name":"permission-3","apiGroups":["apps"],"resources":["deployments"],"verbs":["get"]}`)
	r.Want(200, "GET", lc+"/user-permissions/permission-3", "")
	r.Want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"q1"},"spec":{"cpu":"4"}}`)
	r.Want(200, "GET", lc+"/cluster-quotas/q1", "")
	r.Want(200, "GET", "/v2/cadist/roots", "")
	r.Want(201, "POST", "/v2/auth/tokens", `{"subject":"alice","role":"reader","project":"p1"}`)
	// Key rotation: the gateway reaches every program's KeyService, each
	// with its own keyring.
	r.Want(200, "POST", "/v2/admin/keys/rewrap", `{}`)

	// Deletion: core purges the parts from namespace, user and quota and
	// releases the reference in rsync.
	r.Want(204, "DELETE", lc+"/cluster-providers/edge/cluster-references/c1", "")
	r.Want(204, "DELETE", lc, "")
	require.Eventually(t, func() bool {
		code, _ := apitest.Call(t, client, "GET", r.Base+lc, "")
		return code == 404
	}, 30*time.Second, 100*time.Millisecond)
	r.Want(204, "DELETE", "/v2/cluster-providers/edge/clusters/c1", "")
}
