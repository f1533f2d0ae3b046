package allinone_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/cadist"
	"github.com/dcm-project/dcm/services/core"
	"github.com/dcm-project/dcm/services/gateway"
	"github.com/dcm-project/dcm/services/namespace"
	"github.com/dcm-project/dcm/services/quota"
	"github.com/dcm-project/dcm/services/rsync"
	"github.com/dcm-project/dcm/services/servicemesh"
	"github.com/dcm-project/dcm/services/traffic"
	"github.com/dcm-project/dcm/services/user"
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
	programs := []struct {
		name  string
		build app.Build
	}{
		{rsync.Name, rsync.Build}, {core.Name, core.Build}, {namespace.Name, namespace.Build}, {user.Name, user.Build},
		{quota.Name, quota.Build}, {servicemesh.Name, servicemesh.Build}, {cadist.Name, cadist.Build}, {traffic.Name, traffic.Build},
	}
	addrs := map[string]string{}
	for _, p := range programs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addrs[p.name] = ln.Addr().String()
		require.NoError(t, ln.Close())
	}
	peers := []string{"-core-addr", addrs[core.Name], "-namespace-addr", addrs[namespace.Name],
		"-user-addr", addrs[user.Name], "-quota-addr", addrs[quota.Name], "-servicemesh-addr", addrs[servicemesh.Name],
		"-cadist-addr", addrs[cadist.Name], "-traffic-addr", addrs[traffic.Name], "-rsync-addr", addrs[rsync.Name]}
	logs := &syncBuffer{}
	var stops []func()
	t.Cleanup(func() {
		for _, stop := range slices.Backward(stops) {
			stop()
		}
		if t.Failed() {
			t.Logf("the programs' logs:\n%s", logs.String())
		}
	})
	start := func(name string, build app.Build, needStore bool, args ...string) *app.Program {
		t.Helper()
		require.NoError(t, pki.IssueProgram(dir, name, hosts))
		f := pki.ProgramFiles(dir, name)
		args = append(append([]string{"-data-dir", t.TempDir(), "-log-level", "warn", "-http-addr", "",
			"-tls-ca-file", f.CA, "-tls-cert-file", f.Cert, "-tls-key-file", f.Key}, peers...), args...)
		ctx, cancel := context.WithCancel(context.Background())
		p, err := app.Start(ctx, name, args, needStore, build, app.LogTo(logs))
		if err != nil {
			cancel()
			t.Fatalf("start %s: %v", name, err)
		}
		stops = append(stops, func() {
			cancel()
			if err := p.Wait(); err != nil {
				t.Errorf("%s stopped with %v", name, err)
			}
		})
		return p
	}
	for _, p := range programs {
		prog := start(p.name, p.build, true, "-grpc-addr", addrs[p.name])
		require.Empty(t, prog.Env.Config.MongoURIFile, "%s: its own embedded store", p.name)
	}
	f := pki.ProgramFiles(dir, gateway.Name)
	gw := start(gateway.Name, gateway.Build, false, "-grpc-addr", "", "-http-addr", "127.0.0.1:0",
		"-http-tls-cert-file", f.HTTPCert, "-http-tls-key-file", f.HTTPKey)
	admin, err := tls.LoadX509KeyPair(filepath.Join(dir, pki.AdminCertFile), filepath.Join(dir, pki.AdminKeyFile))
	require.NoError(t, err)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS12, RootCAs: gw.Env.TLS.Pool(), Certificates: []tls.Certificate{admin}}}}
	r := &rest{t: t, c: client, base: "https://" + gw.Server.HTTPAddr()}

	// Clusters (rsync), a project (core), a logical cloud with its
	// namespace, users, permissions and quota (core, namespace, user,
	// quota, each reading core), a reference (core -> rsync), CA roots
	// (cadist), a token (core's AuthService), a rewrap (every program).
	ca, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
	require.NoError(t, err)
	r.want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
	kc, _ := kubeconfig(t, ca, "https://127.0.0.1:1") // never dialed
	body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": "c1"}, "spec": map[string]any{"kubeconfig": kc, "labels": []string{"edge"}}})
	require.NoError(t, err)
	r.want(201, "POST", "/v2/cluster-providers/edge/clusters", string(body))
	r.want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	lc := "/v2/projects/p1/logical-clouds/lc-1"
	r.want(201, "POST", "/v2/projects/p1/logical-clouds", lc1)
	r.want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"c1"}`)
	r.is(200, "GET", lc+"/namespaces", "", `{"clusters":["edge/c1"],"namespaces":[{"name":"ns-1","labels":{"dcm.io/project":"p1","dcm.io/logical-cloud":"lc-1"}}]}`)
	r.want(200, "GET", lc+"/users", "")
	r.want(201, "POST", lc+"/user-permissions", `{"permission-name":"permission-3","apiGroups":["apps"],"resources":["deployments"],"verbs":["get"]}`)
	r.want(200, "GET", lc+"/user-permissions/permission-3", "")
	r.want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"q1"},"spec":{"cpu":"4"}}`)
	r.want(200, "GET", lc+"/cluster-quotas/q1", "")
	r.want(200, "GET", "/v2/cadist/roots", "")
	r.want(201, "POST", "/v2/auth/tokens", `{"subject":"alice","role":"reader","project":"p1"}`)
	// Key rotation: the gateway reaches every program's KeyService, each
	// with its own keyring.
	r.want(200, "POST", "/v2/admin/keys/rewrap", `{}`)

	// Deletion: core purges the parts from namespace, user and quota and
	// releases the reference in rsync.
	r.want(204, "DELETE", lc+"/cluster-providers/edge/cluster-references/c1", "")
	r.want(204, "DELETE", lc, "")
	require.Eventually(t, func() bool {
		code, _ := call(t, client, "GET", r.base+lc, "")
		return code == 404
	}, 30*time.Second, 100*time.Millisecond)
	r.want(204, "DELETE", "/v2/cluster-providers/edge/clusters/c1", "")
}
