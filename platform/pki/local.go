package pki

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The files Bootstrap writes, each with mode 0600.
const (
	CACertFile     = "ca.crt"
	CAKeyFile      = "ca.key"
	ServerCertFile = "server.crt"
	ServerKeyFile  = "server.key"
	AdminCertFile  = "admin.crt"
	AdminKeyFile   = "admin.key"
	AdminTokenFile = "admin.token"
)

// Validity of what Bootstrap issues.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 2 * 365 * 24 * time.Hour
)

// AdminTokenPrefix starts the bootstrap admin token; other tokens are
// issued by the token service and look different.
const AdminTokenPrefix = "dcm_admin_"

// LocalFiles are the files of a bootstrapped dir that a program serves and
// dials with.
func LocalFiles(dir string) Files {
	return Files{CA: filepath.Join(dir, CACertFile), Cert: filepath.Join(dir, ServerCertFile), Key: filepath.Join(dir, ServerKeyFile)}
}

// Bootstrap makes dir a local PKI unless it already is one: a CA, a
// certificate for the programs (server and client use, valid for hosts),
// an admin client certificate and an admin token. It reports whether it
// created them. Programs starting at once on one dir agree on one CA: the
// files are made in a temporary dir that is renamed into place, and the
// loser of that race uses the winner's.
func Bootstrap(dir string, hosts []string) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, CACertFile)); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp(parent, ".pki-")
	if err != nil {
		return false, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	if err := writeLocal(tmp, hosts); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, CACertFile)); statErr == nil {
			return false, nil // another program made it first
		}
		return false, fmt.Errorf("bootstrap %s: %w", dir, err)
	}
	return true, nil
}

func writeLocal(dir string, hosts []string) error {
	ca, err := NewCA("dcm local CA", CAValidity)
	if err != nil {
		return err
	}
	caKey, err := KeyPEM(ca.Key)
	if err != nil {
		return err
	}
	notAfter := time.Now().Add(CertValidity)
	srvCert, srvKey, err := ca.Issue(Request{
		Identity: Identity{Subject: "dcm", Role: RoleService},
		Hosts:    hosts, Server: true, Client: true, NotAfter: notAfter,
	})
	if err != nil {
		return err
	}
	admCert, admKey, err := ca.Issue(Request{Identity: Identity{Subject: "admin", Role: RoleAdmin}, Client: true, NotAfter: notAfter})
	if err != nil {
		return err
	}
	tok := make([]byte, 32)
	_, _ = rand.Read(tok)
	files := map[string][]byte{
		CACertFile: CertPEM(ca.Cert.Raw), CAKeyFile: caKey,
		ServerCertFile: srvCert, ServerKeyFile: srvKey,
		AdminCertFile: admCert, AdminKeyFile: admKey,
		AdminTokenFile: []byte(AdminTokenPrefix + hex.EncodeToString(tok) + "\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// DefaultHosts are the names a bootstrapped server certificate is valid
// for: loopback and this machine's host name.
func DefaultHosts() []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		hosts = append(hosts, h)
	}
	return hosts
}
