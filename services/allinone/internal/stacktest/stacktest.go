// Package stacktest starts the whole all-in-one program for a test: every
// service and the gateway on free loopback ports, on an embedded store in a
// temporary directory (or a fresh database on DCM_TEST_MONGO_URI), with
// the local PKI its first start makes. It is the program users run, not a
// test double.
package stacktest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/allinone"
)

// Stack is a running all-in-one program.
type Stack struct {
	*app.Program
	// URL is the REST base URL, e.g. https://127.0.0.1:40123.
	URL string
	// GRPC is the combined gRPC endpoint.
	GRPC string
	// DataDir holds the store, the local PKI (pki/) and the keyring (kek).
	DataDir string
	// CA is the local CA, to issue test certificates.
	CA *pki.CA
	// Admin is an HTTPS client with the admin client certificate.
	Admin *http.Client
	// AdminToken is the bootstrap admin bearer token.
	AdminToken string

	stop func()
}

// Stop stops the program now (a test that restarts it on the same data
// dir); otherwise it stops when the test ends.
func (s *Stack) Stop() { s.stop() }

// Client is an HTTPS client that trusts the stack's CA and presents cert
// (nil: none).
func (s *Stack) Client(cert *tls.Certificate) *http.Client {
	cfg := &tls.Config{RootCAs: s.Env.TLS.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
}

// Issue returns a client certificate for id from the stack's CA, valid
// until notAfter.
func (s *Stack) Issue(t testing.TB, id pki.Identity, notAfter time.Time) tls.Certificate {
	t.Helper()
	c, k, err := s.CA.Issue(pki.Request{Identity: id, Client: true, NotAfter: notAfter})
	if err != nil {
		t.Fatalf("issue: %v", err)
	}
	pair, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatalf("issue: %v", err)
	}
	return pair
}

// Start runs the program until the test ends, then checks it shut down cleanly.
func Start(t testing.TB) *Stack {
	t.Helper()
	return StartWith(t, Options{})
}

// Options change how StartWith starts the program.
type Options struct {
	// DataDir to run on (to restart on the same one); empty is a new one.
	DataDir string
	// Args are more command-line flags.
	Args []string
	// Logs receives the program's log lines (JSON) instead of stderr.
	Logs io.Writer
	// Build replaces allinone.Build (a test that wraps its services, e.g.
	// to count the calls each method gets); nil is allinone.Build.
	Build app.Build
}

// StartWith is Start with options.
func StartWith(t testing.TB, o Options) *Stack {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the whole program: not in -short (make test-unit)")
	}
	dataDir := o.DataDir
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	args := []string{
		"-grpc-addr", "127.0.0.1:0",
		"-http-addr", "127.0.0.1:0",
		"-data-dir", dataDir,
		"-log-level", "warn",
		// No cluster health probes unless a test asks (Args): tests
		// register clusters at addresses nothing answers on.
		"-cluster-probe-interval", "0",
	}
	args = append(args, o.Args...)
	if uri := os.Getenv("DCM_TEST_MONGO_URI"); uri != "" {
		// The URI is a secret: never a flag, a file the program reads.
		uriFile := filepath.Join(t.TempDir(), "mongo-uri")
		if err := os.WriteFile(uriFile, []byte(uri), 0o600); err != nil {
			t.Fatalf("write mongo URI file: %v", err)
		}
		args = append(args, "-mongo-uri-file", uriFile, "-mongo-database", fmt.Sprintf("dcmstack_%d", time.Now().UnixNano()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var with []app.StartOption
	if o.Logs == nil {
		o.Logs = noAudit{os.Stderr}
	}
	if o.Logs != nil {
		with = append(with, app.LogTo(o.Logs))
	}
	build := o.Build
	if build == nil {
		build = allinone.Build
	}
	p, err := app.Start(ctx, allinone.Name, args, true, build, with...)
	if err != nil {
		cancel()
		t.Fatalf("start all-in-one: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			if os.Getenv("DCM_TEST_MONGO_URI") != "" {
				_ = p.Env.Store.Database().Drop(context.Background())
			}
			cancel()
			if err := p.Wait(); err != nil {
				t.Errorf("all-in-one stopped with %v", err)
			}
			checkCollections(t, p.Env.Store)
		})
	}
	t.Cleanup(stop)
	s := &Stack{stop: stop, Program: p, URL: "https://" + p.Server.HTTPAddr(), GRPC: p.Server.GRPCAddr(), DataDir: dataDir, AdminToken: p.Env.AdminToken}
	if p.Env.Config.InsecureHTTP {
		s.URL = "http://" + p.Server.HTTPAddr()
	}
	dir := filepath.Join(dataDir, "pki")
	if s.CA, err = pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile)); err != nil {
		t.Fatalf("local CA: %v", err)
	}
	admin, err := tls.LoadX509KeyPair(filepath.Join(dir, pki.AdminCertFile), filepath.Join(dir, pki.AdminKeyFile))
	if err != nil {
		t.Fatalf("admin certificate: %v", err)
	}
	s.Admin = s.Client(&admin)
	return s
}

// checkCollections fails the test when a service opened, while the program
// ran, a collection its Collections (allinone.StoreUsers) do not list: a
// database whose roles were set up from docs/store.md would refuse it.
// cmd/storedoc's test checks the same on a program just built; this also
// sees what a service opens later. Collections the test itself opened on
// the program's store (not on a service's view) are not the program's.
func checkCollections(t testing.TB, st *store.Store) {
	t.Helper()
	declared := map[string][]string{}
	for _, u := range allinone.StoreUsers {
		declared[u.Name] = u.Collections
	}
	for svc, colls := range st.Opened() {
		if svc == "" {
			continue
		}
		for _, c := range colls {
			if !slices.Contains(declared[svc], c) {
				t.Errorf("service %s opened collection %q, which its Collections (services/%s/%s.go) do not list: add it there and run make generate (docs/store.md)", svc, c, svc, svc)
			}
		}
	}
}

// noAudit passes log lines on, but for the audit log's, which are written
// whatever the level: a test that reads them asks for Options.Logs.
type noAudit struct{ w io.Writer }

func (n noAudit) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"logger":"dcm.audit"`)) {
		return len(p), nil
	}
	return n.w.Write(p)
}
