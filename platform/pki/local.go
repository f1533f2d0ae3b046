package pki

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	// HTTPSCertFile and HTTPSKeyFile are the HTTPS listeners' certificate
	// (server use only, no role: see TLS.HTTPServingError), made on demand.
	HTTPSCertFile = "https.crt"
	HTTPSKeyFile  = "https.key"
)

// AllInOne is the all-in-one program's name, and the common name of its
// certificate (ServerCertFile): being every service in one process, it
// holds every service's rights (platform/server's allow-lists).
const AllInOne = "dcm"

// HTTPSSubject is the common name of the local PKI's HTTPS certificate.
const HTTPSSubject = "dcm gateway"

// Validity of what Bootstrap issues.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	CertValidity = 2 * 365 * 24 * time.Hour
)

// AdminTokenPrefix starts the bootstrap admin token; other tokens are
// issued by the token service and look different.
const AdminTokenPrefix = "dcm_admin_"

// LocalFiles are the files of a bootstrapped dir that the all-in-one
// program serves and dials with.
func LocalFiles(dir string) Files { return ProgramFiles(dir, AllInOne) }

// ProgramFiles are the files of a bootstrapped dir that the program named
// name serves and dials with: its own certificate (ServerCertFile for the
// all-in-one program, <name>.crt and <name>.key for the others, see
// IssueProgram) and the HTTPS certificate (IssueHTTPS).
func ProgramFiles(dir, name string) Files {
	f := Files{CA: filepath.Join(dir, CACertFile), Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"),
		HTTPCert: filepath.Join(dir, HTTPSCertFile), HTTPKey: filepath.Join(dir, HTTPSKeyFile)}
	if name == AllInOne {
		f.Cert, f.Key = filepath.Join(dir, ServerCertFile), filepath.Join(dir, ServerKeyFile)
	}
	return f
}

// Bootstrap makes dir a local PKI unless it already is one: a CA, the
// all-in-one program's certificate (CN AllInOne, server and client use,
// valid for hosts), the HTTPS certificate (IssueHTTPS),
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
		Identity: Identity{Subject: AllInOne, Role: RoleService},
		Hosts:    hosts, Server: true, Client: true, NotAfter: notAfter,
	})
	if err != nil {
		return err
	}
	admCert, admKey, err := ca.Issue(Request{Identity: Identity{Subject: "admin", Role: RoleAdmin}, Client: true, NotAfter: notAfter})
	if err != nil {
		return err
	}
	httpsCert, httpsKey, err := ca.Issue(Request{Identity: Identity{Subject: HTTPSSubject}, Hosts: hosts, Server: true, NotAfter: notAfter})
	if err != nil {
		return err
	}
	tok := make([]byte, 32)
	_, _ = rand.Read(tok)
	files := map[string][]byte{
		CACertFile: CertPEM(ca.Cert.Raw), CAKeyFile: caKey,
		ServerCertFile: srvCert, ServerKeyFile: srvKey,
		AdminCertFile: admCert, AdminKeyFile: admKey,
		HTTPSCertFile: httpsCert, HTTPSKeyFile: httpsKey,
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

// IssueProgram makes sure the bootstrapped dir holds a certificate for the
// program named name (ProgramFiles): CN name, role service, server and
// client use, valid for hosts, from the local CA. Per-service programs
// started on one data dir each get their own identity this way.
func IssueProgram(dir, name string, hosts []string) error {
	if name == AllInOne {
		return nil // Bootstrap made it
	}
	if name == "" || strings.ContainsAny(name, `/\.`) {
		return fmt.Errorf("program name %q cannot name a certificate file", name)
	}
	return issueOnce(dir, name+".crt", name+".key", Request{
		Identity: Identity{Subject: name, Role: RoleService}, Hosts: hosts, Server: true, Client: true,
	})
}

// IssueHTTPS makes sure the bootstrapped dir holds the HTTPS listeners'
// certificate: CN HTTPSSubject, no role, server use only, valid for hosts.
func IssueHTTPS(dir string, hosts []string) error {
	return issueOnce(dir, HTTPSCertFile, HTTPSKeyFile, Request{Identity: Identity{Subject: HTTPSSubject}, Hosts: hosts, Server: true})
}

// issueOnce writes a certificate and its key (0600), signed by dir's CA,
// unless certName is there already. Programs starting at once agree on
// one pair: the key is linked into place exclusively, the winner then
// renames the certificate in, the others wait for it. A key left without
// its certificate (a crash in between) is replaced after staleIssue.
func issueOnce(dir, certName, keyName string, r Request) error {
	certPath, keyPath := filepath.Join(dir, certName), filepath.Join(dir, keyName)
	for attempt := 0; ; attempt++ {
		if _, err := os.Stat(certPath); err == nil {
			return nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if st, err := os.Stat(keyPath); err == nil {
			// Another program is issuing: wait for its certificate.
			if time.Since(st.ModTime()) > staleIssue {
				_ = os.Remove(keyPath)
			} else if attempt < 200 {
				time.Sleep(50 * time.Millisecond)
			} else {
				return fmt.Errorf("%s has no certificate %s beside it", keyPath, certPath)
			}
			continue
		}
		ca, err := LoadCA(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile))
		if err != nil {
			return err
		}
		r.NotAfter = time.Now().Add(CertValidity)
		certPEM, keyPEM, err := ca.Issue(r)
		if err != nil {
			return err
		}
		tmpKey, err := writeTemp(dir, keyPEM)
		if err != nil {
			return err
		}
		err = os.Link(tmpKey, keyPath)
		_ = os.Remove(tmpKey)
		if errors.Is(err, fs.ErrExist) {
			continue // lost the race
		}
		if err != nil {
			return err
		}
		tmpCert, err := writeTemp(dir, certPEM)
		if err != nil {
			return err
		}
		if err := os.Rename(tmpCert, certPath); err != nil {
			_ = os.Remove(tmpCert)
			return err
		}
		return nil
	}
}

// staleIssue is how long a key may wait for its certificate before
// another program takes it for a crashed issuer's and issues anew.
const staleIssue = time.Minute

func writeTemp(dir string, b []byte) (string, error) {
	f, err := os.CreateTemp(dir, ".issue-")
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o600)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
