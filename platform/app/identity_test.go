package app_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
)

// restBuild is a program serving REST, as the gateway does.
func restBuild(context.Context, *app.Env) ([]server.Service, server.Options, error) {
	return nil, server.Options{HTTPHandler: http.NotFoundHandler()}, nil
}

// TestProgramIdentity: with the local PKI each program serves and dials
// with a certificate of its own name; with configured files a certificate
// naming another program is refused at start, naming the setting, and
// REST is never served with a certificate that is also a client one.
func TestProgramIdentity(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	data := t.TempDir()
	start := func(name string, args ...string) (*app.Program, error) {
		args = append([]string{"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0", "-data-dir", data}, args...)
		return app.Start(ctx, name, args, false, restBuild, app.LogTo(io.Discard))
	}
	p, err := start("gateway")
	require.NoError(t, err, "the local PKI's HTTPS certificate serves REST")
	require.Equal(t, pki.Identity{Subject: "gateway", Role: pki.RoleService, Method: "certificate"}, p.Env.TLS.Identity())
	require.NoError(t, p.Env.TLS.HTTPServingError())

	dir := filepath.Join(data, "pki")
	ca, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
	require.NoError(t, err)
	write := func(r pki.Request) (string, string) {
		r.NotAfter = time.Now().Add(time.Hour)
		c, k, err := ca.Issue(r)
		require.NoError(t, err)
		d := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(d, "tls.crt"), c, 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(d, "tls.key"), k, 0o600))
		return filepath.Join(d, "tls.crt"), filepath.Join(d, "tls.key")
	}
	files := func(cert, key string) []string {
		return []string{"-tls-ca-file", filepath.Join(dir, pki.CACertFile), "-tls-cert-file", cert, "-tls-key-file", key}
	}
	coreCert, coreKey := write(pki.Request{Identity: pki.Identity{Subject: "core", Role: pki.RoleService}, Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	_, err = start("quota", files(coreCert, coreKey)...)
	require.ErrorContains(t, err, "DCM_TLS_CERT_FILE", "quota does not serve as core")
	adminCert, adminKey := write(pki.Request{Identity: pki.Identity{Subject: "gateway", Role: pki.RoleAdmin}, Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	_, err = start("gateway", files(adminCert, adminKey)...)
	require.ErrorContains(t, err, "DCM_TLS_CERT_FILE", "a program's role is service")

	gwCert, gwKey := write(pki.Request{Identity: pki.Identity{Subject: "gateway", Role: pki.RoleService}, Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	_, err = start("gateway", files(gwCert, gwKey)...)
	require.ErrorContains(t, err, "DCM_HTTP_TLS_CERT_FILE", "REST is not served with the program's client certificate")
	httpsCert, httpsKey := write(pki.Request{Identity: pki.Identity{Subject: "dcm.example.com"}, Hosts: []string{"127.0.0.1"}, Server: true})
	p, err = start("gateway", append(files(gwCert, gwKey), "-http-tls-cert-file", httpsCert, "-http-tls-key-file", httpsKey)...)
	require.NoError(t, err)
	require.Equal(t, "gateway", p.Env.TLS.Identity().Subject)
}
