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
