package pki_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/pki"
)

// TestBootstrapRace: programs starting at once on one data dir end up with
// one CA, and exactly one of them made it.
func TestBootstrapRace(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pki")
	const n = 8
	var wg sync.WaitGroup
	created := make(chan bool, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pki.Bootstrap(dir, pki.DefaultHosts())
			if err != nil {
				t.Error(err)
			}
			created <- c
		}()
	}
	wg.Wait()
	close(created)
	makers := 0
	for c := range created {
		if c {
			makers++
		}
	}
	require.Equal(t, 1, makers)
	entries, err := os.ReadDir(filepath.Dir(dir))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary dirs left behind")

	m, err := pki.Load(pki.LocalFiles(dir))
	require.NoError(t, err)
	admin, err := tls.LoadX509KeyPair(filepath.Join(dir, pki.AdminCertFile), filepath.Join(dir, pki.AdminKeyFile))
	require.NoError(t, err)
	id, err := m.VerifyClient([]*x509.Certificate{admin.Leaf})
	require.NoError(t, err)
	require.Equal(t, pki.Identity{Subject: "admin", Role: pki.RoleAdmin, Method: "certificate"}, id)
	for _, f := range []string{pki.CACertFile, pki.CAKeyFile, pki.ServerCertFile, pki.ServerKeyFile, pki.AdminCertFile, pki.AdminKeyFile, pki.AdminTokenFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), f)
	}
}

// TestIdentity: a certificate carries who, role and project scope, and
// only a client certificate of the CA, still valid, is accepted.
func TestIdentity(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pki")
	_, err := pki.Bootstrap(dir, nil)
	require.NoError(t, err)
	m, err := pki.Load(pki.LocalFiles(dir))
	require.NoError(t, err)
	ca, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
	require.NoError(t, err)
	leaf := func(ca *pki.CA, r pki.Request) *x509.Certificate {
		c, _, err := ca.Issue(r)
		require.NoError(t, err)
		block, _ := pem.Decode(c)
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		return cert
	}
	year := time.Now().Add(365 * 24 * time.Hour)
	id := pki.Identity{Subject: "alice", Role: pki.RoleProjectAdmin, Project: "p1"}
	got, err := m.VerifyClient([]*x509.Certificate{leaf(ca, pki.Request{Identity: id, Client: true, NotAfter: year})})
	require.NoError(t, err)
	id.Method = "certificate"
	require.Equal(t, id, got)

	other, err := pki.NewCA("other", time.Hour)
	require.NoError(t, err)
	for name, c := range map[string]*x509.Certificate{
		"expired":     leaf(ca, pki.Request{Identity: id, Client: true, NotAfter: time.Now().Add(-time.Second)}),
		"not yet":     leaf(ca, pki.Request{Identity: id, Client: true, NotBefore: time.Now().Add(time.Hour), NotAfter: year}),
		"server only": leaf(ca, pki.Request{Identity: id, Server: true, NotAfter: year}),
		"other CA":    leaf(other, pki.Request{Identity: id, Client: true, NotAfter: year}),
	} {
		_, err := m.VerifyClient([]*x509.Certificate{c})
		require.ErrorIs(t, err, pki.ErrBadCertificate, name)
	}
	_, err = m.VerifyClient(nil)
	require.ErrorIs(t, err, pki.ErrBadCertificate)
}

// TestProgramCertificates: programs starting at once on one bootstrapped
// dir get one certificate per program name (CN the name, role service,
// 0600), and the HTTPS certificate cannot authenticate as anyone: it is
// fit to serve a public listener, a program's certificate is not.
func TestProgramCertificates(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pki")
	_, err := pki.Bootstrap(dir, pki.DefaultHosts())
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 4 {
		for _, name := range []string{"core", "gateway"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := pki.IssueProgram(dir, name, pki.DefaultHosts()); err != nil {
					t.Error(err)
				}
				if err := pki.IssueHTTPS(dir, pki.DefaultHosts()); err != nil {
					t.Error(err)
				}
			}()
		}
	}
	wg.Wait()
	for _, name := range []string{"core", "gateway", pki.AllInOne} {
		m, err := pki.Load(pki.ProgramFiles(dir, name))
		require.NoError(t, err, name)
		require.Equal(t, pki.Identity{Subject: name, Role: pki.RoleService, Method: "certificate"}, m.Identity())
		require.NoError(t, m.OwnServiceError(), name)
		require.NoError(t, m.HTTPServingError(), "%s serves HTTPS with the HTTPS certificate", name)
		own := pki.ProgramFiles(dir, name)
		own.HTTPCert, own.HTTPKey = "", ""
		m, err = pki.Load(own)
		require.NoError(t, err)
		require.Error(t, m.HTTPServingError(), "a program's certificate is a client certificate")
	}
	for _, f := range []string{"core.crt", "core.key", "gateway.crt", "gateway.key", pki.HTTPSCertFile, pki.HTTPSKeyFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), f)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 13, "no temporary files left behind: %v", entries)
	require.Error(t, pki.IssueProgram(dir, "../x", nil))
}

// TestServiceCAPinned: of a bundle of CAs, the role service is believed
// only from the service CA (by default the one that issued the program's
// own certificate); another CA of the bundle may still issue admins'.
func TestServiceCAPinned(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pki")
	_, err := pki.Bootstrap(dir, nil)
	require.NoError(t, err)
	ca, err := pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
	require.NoError(t, err)
	foreign, err := pki.NewCA("foreign", time.Hour)
	require.NoError(t, err)
	bundle := filepath.Join(t.TempDir(), "bundle.crt")
	require.NoError(t, os.WriteFile(bundle, append(pki.CertPEM(ca.Cert.Raw), pki.CertPEM(foreign.Cert.Raw)...), 0o600))
	leaf := func(ca *pki.CA, id pki.Identity) *x509.Certificate {
		c, _, err := ca.Issue(pki.Request{Identity: id, Client: true, NotAfter: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		block, _ := pem.Decode(c)
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		return cert
	}
	core := pki.Identity{Subject: "core", Role: pki.RoleService}
	admin := pki.Identity{Subject: "ops", Role: pki.RoleAdmin}

	files := pki.LocalFiles(dir)
	files.CA = bundle
	m, err := pki.Load(files)
	require.NoError(t, err)
	_, err = m.VerifyClient([]*x509.Certificate{leaf(ca, core)})
	require.NoError(t, err)
	_, err = m.VerifyClient([]*x509.Certificate{leaf(foreign, core)})
	require.ErrorIs(t, err, pki.ErrBadCertificate, "a service identity of another CA of the bundle")
	_, err = m.VerifyClient([]*x509.Certificate{leaf(foreign, admin)})
	require.NoError(t, err, "an admin of another CA of the bundle")
	// Dialing, a program trusts servers of the service CA only.
	serverOf := func(ca *pki.CA) *x509.Certificate {
		c, _, err := ca.Issue(pki.Request{Identity: core, Hosts: []string{"core"}, Server: true, NotAfter: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		block, _ := pem.Decode(c)
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		return cert
	}
	_, err = serverOf(ca).Verify(x509.VerifyOptions{Roots: m.Client().RootCAs, DNSName: "core"})
	require.NoError(t, err)
	_, err = serverOf(foreign).Verify(x509.VerifyOptions{Roots: m.Client().RootCAs, DNSName: "core"})
	require.Error(t, err, "a server of another CA of the bundle")

	// A configured service CA replaces the default.
	files.ServiceCA = filepath.Join(t.TempDir(), "services.crt")
	require.NoError(t, os.WriteFile(files.ServiceCA, pki.CertPEM(foreign.Cert.Raw), 0o600))
	m, err = pki.Load(files)
	require.NoError(t, err)
	_, err = m.VerifyClient([]*x509.Certificate{leaf(foreign, core)})
	require.NoError(t, err)
	_, err = m.VerifyClient([]*x509.Certificate{leaf(ca, core)})
	require.ErrorIs(t, err, pki.ErrBadCertificate)
	require.Error(t, m.OwnServiceError(), "the program's own certificate is not of its service CA")
}

// TestParseCertificates reads CERTIFICATE blocks only, and never quotes
// what it refuses (it may be a key sent in the wrong field).
func TestParseCertificates(t *testing.T) {
	ca, err := pki.NewCA("test", time.Hour)
	require.NoError(t, err)
	cert := string(pki.CertPEM(ca.Cert.Raw))
	key, err := pki.KeyPEM(ca.Key)
	require.NoError(t, err)

	got, err := pki.ParseCertificates(cert + cert)
	require.NoError(t, err)
	require.Len(t, got, 2)
	got, err = pki.ParseCertificates(" \n")
	require.NoError(t, err)
	require.Empty(t, got)
	for name, text := range map[string]string{
		"a key":       string(key),
		"a key after": cert + string(key),
		"not PEM":     "hello",
		"text after":  cert + "trailing",
		"a bad DER":   string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("x")})),
	} {
		_, err := pki.ParseCertificates(text)
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), "PRIVATE", name)
		require.NotContains(t, err.Error(), "trailing", name)
	}
}
