// Package storeserver runs a store server that programs on many machines
// can share: Debian's PostgreSQL as a cluster of its own (a data directory,
// loopback only, run as a user other than root) and FerretDB v1.24 (the
// module the embedded store uses, its postgresql backend) in front of it,
// speaking the MongoDB wire protocol over TLS, with a database user per
// service that may use only that service's collections (GrantsSQL). It is
// what `dcm-store` (platform/store/cmd/dcm-store, `make store-server`) runs
// and what the store-server tests start. It must not be imported by a
// service: programs reach the server through a URI file, like MongoDB.
package storeserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/dcm-project/dcm/platform/pki"
)

// Config says where the server lives and who uses it.
type Config struct {
	// Dir holds everything: PostgreSQL's data directory, the TLS files,
	// the passwords and the URI files. Made at the first start, reused
	// after.
	Dir string
	// Database is the MongoDB database the services use ("dcm").
	Database string
	// Host is the address FerretDB listens on, an IP address of this
	// machine; "" is 127.0.0.1. Its certificate names it (and the
	// loopback names). PostgreSQL stays on loopback whatever it is.
	Host string
	// Users are the services and their collections (Users, generated from
	// each service's declared collections).
	Users []User
	// PGBin is the directory of PostgreSQL's programs; "" finds Debian's
	// (/usr/lib/postgresql/<newest>/bin) or pg_ctl's on PATH.
	PGBin string
	// PGUser is the system user PostgreSQL runs as when this program runs
	// as root (PostgreSQL refuses root); "" is "postgres".
	PGUser string
	// Log receives FerretDB's log; nil discards it. Keep it at error
	// level: FerretDB logs whole messages below it, a PLAIN login's
	// password included.
	Log *slog.Logger
}

// state is what the first start decided, kept in Dir/server.json so that a
// restart serves the same addresses.
type state struct {
	PGPort int `json:"pg_port"`
	Port   int `json:"port"`
}

// Server is a running (or stopped) store server.
type Server struct {
	cfg   Config
	st    state
	pgBin string
	cred  *syscall.Credential // PostgreSQL's user, when we are root

	mu     sync.Mutex
	pg     *exec.Cmd
	pgDone chan struct{}
	fdb    context.CancelFunc
	fdbEnd chan struct{}
}

// Files under Dir.
const (
	stateFile  = "server.json"
	pgDir      = "pg"
	runDir     = "run"
	tlsDir     = "tls"
	secretsDir = "secrets"
	uriDir     = "uri"
	logDir     = "log"
)

// New prepares cfg.Dir (PostgreSQL's cluster made on the first call) but
// starts nothing.
func New(cfg Config) (*Server, error) {
	if cfg.Database == "" {
		cfg.Database = "dcm"
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if err := localAddress(cfg.Host); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	cfg.Dir = dir
	s := &Server{cfg: cfg}
	if s.pgBin, err = findPGBin(cfg.PGBin); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		name := cfg.PGUser
		if name == "" {
			name = "postgres"
		}
		u, err := user.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("store server: PostgreSQL does not run as root and user %s is missing (apt-get install postgresql makes it): %w", name, err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if err := s.prepare(); err != nil {
		return nil, err
	}
	return s, nil
}

// localAddress refuses a host that is not an IP address of one of this
// machine's interfaces: the server listens only where this machine is.
func localAddress(host string) error {
	ip := net.ParseIP(host)
	if ip == nil {
		return fmt.Errorf("store server: host %q: an IP address of this machine, not a name", host)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return fmt.Errorf("store server: host %s: list this machine's addresses: %w", host, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return nil
		}
	}
	return fmt.Errorf("store server: host %s is no address of this machine's interfaces", host)
}

func findPGBin(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres"); len(m) > 0 {
		return filepath.Dir(m[len(m)-1]), nil
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(r), nil
		}
	}
	return "", errors.New("store server: PostgreSQL is not installed (apt-get install postgresql)")
}

// prepare makes Dir on the first start: free ports, the TLS files, a
// password per role and PostgreSQL's cluster.
func (s *Server) prepare() error {
	d := s.cfg.Dir
	// Traversable by PostgreSQL's user, readable by nobody else: what is
	// secret is in 0700 directories below.
	if err := os.MkdirAll(d, 0o711); err != nil {
		return err
	}
	if err := os.Chmod(d, 0o711); err != nil {
		return err
	}
	for _, sub := range []string{tlsDir, secretsDir, uriDir, logDir} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o700); err != nil {
			return err
		}
	}
	b, err := os.ReadFile(filepath.Join(d, stateFile))
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &s.st); err != nil {
			return fmt.Errorf("store server: %s: %w", stateFile, err)
		}
	case errors.Is(err, os.ErrNotExist):
		if s.st.PGPort, err = freePort("127.0.0.1"); err != nil {
			return err
		}
		if s.st.Port, err = freePort(s.cfg.Host); err != nil {
			return err
		}
		b, _ := json.Marshal(s.st)
		if err := os.WriteFile(filepath.Join(d, stateFile), b, 0o600); err != nil {
			return err
		}
	default:
		return err
	}
	if err := s.tlsFiles(); err != nil {
		return err
	}
	for _, r := range s.roles() {
		if _, err := s.password(r); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(d, pgDir, "PG_VERSION")); err == nil {
		return nil
	}
	return s.initdb()
}

// roles are the administrator, the all-in-one user and one per service.
func (s *Server) roles() []string {
	out := []string{AdminRole, AllInOneRole}
	for _, u := range s.cfg.Users {
		out = append(out, Role(u.Service))
	}
	return out
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tlsFiles makes a CA and FerretDB's server certificate for Host and the
// loopback names, once; again (a new CA: clients must read ca.crt anew)
// when a start with another Host finds a certificate that does not name it.
func (s *Server) tlsFiles() error {
	dir := filepath.Join(s.cfg.Dir, tlsDir)
	if b, err := os.ReadFile(filepath.Join(dir, "server.crt")); err == nil {
		if c, err := pki.ParseCertificates(string(b)); err == nil && len(c) == 1 && c[0].VerifyHostname(s.cfg.Host) == nil {
			return nil
		}
	}
	ca, err := pki.NewCA("dcm store server CA", 5*365*24*time.Hour)
	if err != nil {
		return err
	}
	cert, key, err := ca.Issue(pki.Request{Identity: pki.Identity{Subject: "dcm-store"},
		Hosts: hosts(s.cfg.Host), Server: true, NotAfter: time.Now().Add(5 * 365 * 24 * time.Hour)})
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{"ca.crt": pki.CertPEM(ca.Cert.Raw), "server.crt": cert, "server.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func hosts(host string) []string {
	out := []string{"127.0.0.1", "localhost"}
	if host != "127.0.0.1" {
		out = append(out, host)
	}
	return out
}

// CAFile is the CA certificate clients verify the server with.
func (s *Server) CAFile() string { return filepath.Join(s.cfg.Dir, tlsDir, "ca.crt") }

// password is role's password, made (random, in a 0600 file) the first time.
func (s *Server) password(role string) (string, error) {
	f := filepath.Join(s.cfg.Dir, secretsDir, role+".password")
	if b, err := os.ReadFile(f); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	pw := hex.EncodeToString(b)
	return pw, os.WriteFile(f, []byte(pw+"\n"), 0o600)
}

func (s *Server) initdb() error {
	pg := filepath.Join(s.cfg.Dir, pgDir)
	run := filepath.Join(s.cfg.Dir, runDir)
	for _, d := range []string{pg, run} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if err := s.chown(d); err != nil {
			return err
		}
	}
	pw, err := s.password(AdminRole)
	if err != nil {
		return err
	}
	// initdb reads the superuser's password from a file it can open: a
	// 0600 copy owned by its user, removed at once.
	pwFile := filepath.Join(run, "initdb.pw")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		return err
	}
	// The password file goes whatever initdb did; its removal failing
	// leaves a 0600 file in a 0700 directory.
	defer func() { _ = os.Remove(pwFile) }()
	if err := s.chown(pwFile); err != nil {
		return err
	}
	cmd := s.pgCommand("initdb", "-D", pg, "-U", AdminRole, "--pwfile", pwFile, "--auth", "scram-sha-256",
		"-E", "UTF8", "--locale", "C")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("store server: initdb: %w: %s", err, out)
	}
	return nil
}

func (s *Server) chown(path string) error {
	if s.cred == nil {
		return nil
	}
	return os.Chown(path, int(s.cred.Uid), int(s.cred.Gid))
}

// pgCommand runs one of PostgreSQL's programs, as its user when we are root.
func (s *Server) pgCommand(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.pgBin, name), args...)
	cmd.Dir = s.cfg.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	return cmd
}

// StartPostgres starts PostgreSQL and waits until it accepts connections.
func (s *Server) StartPostgres(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pg != nil {
		return nil
	}
	logf, err := os.OpenFile(filepath.Join(s.cfg.Dir, logDir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }() // the child holds its own descriptor
	cmd := s.pgCommand("postgres", "-D", filepath.Join(s.cfg.Dir, pgDir),
		"-c", "listen_addresses=127.0.0.1", "-c", "port="+strconv.Itoa(s.st.PGPort),
		"-c", "unix_socket_directories="+filepath.Join(s.cfg.Dir, runDir),
		// A failed statement is never written to the log: a CREATE ROLE
		// carries a password.
		"-c", "log_min_error_statement=panic", "-c", "max_connections=300")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("store server: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.pg, s.pgDone = cmd, done
	deadline := time.Now().Add(60 * time.Second)
	for {
		c := exec.CommandContext(ctx, filepath.Join(s.pgBin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(s.st.PGPort))
		if c.Run() == nil {
			return nil
		}
		select {
		case <-done:
			s.pg = nil
			return fmt.Errorf("store server: postgres exited at start (see %s)", filepath.Join(s.cfg.Dir, logDir, "postgres.log"))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("store server: postgres did not accept connections in 60 s")
		}
	}
}

// StopPostgres stops PostgreSQL: at once with SIGKILL when kill (a crash:
// it recovers from its write-ahead log at the next start), else with a
// fast shutdown. It waits for the process to end.
func (s *Server) StopPostgres(kill bool) {
	s.mu.Lock()
	cmd, done := s.pg, s.pgDone
	s.pg = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	if kill {
		// The postmaster and its backends: the whole process group.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	} else {
		_ = cmd.Process.Signal(syscall.SIGINT)
	}
	<-done
	if kill {
		// Backends left without their postmaster exit on their own; a new
		// postmaster refuses to start while they hold the shared memory.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// StartFerretDB starts FerretDB (in this process) on the TLS address,
// in front of PostgreSQL; clients log in with PLAIN as a PostgreSQL role.
func (s *Server) StartFerretDB() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fdb != nil {
		return nil
	}
	log := s.cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tls := filepath.Join(s.cfg.Dir, tlsDir)
	f, err := ferretdb.New(&ferretdb.Config{
		Listener: ferretdb.ListenerConfig{TLS: s.Addr(),
			TLSCertFile: filepath.Join(tls, "server.crt"), TLSKeyFile: filepath.Join(tls, "server.key")},
		Handler: "postgresql",
		// No credentials: FerretDB logs in as each client's user.
		PostgreSQLURL: fmt.Sprintf("postgres://127.0.0.1:%d/%s?sslmode=disable", s.st.PGPort, url.PathEscape(s.cfg.Database)),
		Logger:        log,
	})
	if err != nil {
		return fmt.Errorf("store server: ferretdb: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	end := make(chan struct{})
	go func() {
		defer close(end)
		_ = f.Run(ctx)
	}()
	_ = f.MongoDBURI() // blocks until it listens
	s.fdb, s.fdbEnd = cancel, end
	return nil
}

// StopFerretDB stops FerretDB: its listener and every client connection
// close at once.
func (s *Server) StopFerretDB() {
	s.mu.Lock()
	cancel, end := s.fdb, s.fdbEnd
	s.fdb = nil
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-end
	}
}

// PostgresPID is the process id of PostgreSQL's postmaster; 0 when stopped.
func (s *Server) PostgresPID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pg == nil {
		return 0
	}
	return s.pg.Process.Pid
}

// Addr is FerretDB's TLS address, on Host.
func (s *Server) Addr() string { return net.JoinHostPort(s.cfg.Host, strconv.Itoa(s.st.Port)) }

// Start starts PostgreSQL and FerretDB and provisions the users (Provision).
func (s *Server) Start(ctx context.Context) error {
	if err := s.StartPostgres(ctx); err != nil {
		return err
	}
	if err := s.StartFerretDB(); err != nil {
		s.StopPostgres(false)
		return err
	}
	if err := s.Provision(ctx); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// Stop stops FerretDB, then PostgreSQL.
func (s *Server) Stop() {
	s.StopFerretDB()
	s.StopPostgres(false)
}

// Provision makes (or brings up to date) the database, the version guard
// (guardSQL), a role per user with its password, every declared
// collection, the grants (GrantsSQL) and the URI files.
func (s *Server) Provision(ctx context.Context) error {
	if err := s.psql(ctx, "postgres", fmt.Sprintf(
		"SELECT 'CREATE DATABASE %s' WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = %s)\\gexec\n",
		quoteIdent(s.cfg.Database), quoteLiteral(s.cfg.Database))); err != nil {
		return err
	}
	var roles strings.Builder
	for _, r := range s.roles()[1:] {
		pw, err := s.password(r)
		if err != nil {
			return err
		}
		fmt.Fprintf(&roles, "SELECT 'CREATE ROLE %s' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = %s)\\gexec\n",
			quoteIdent(r), quoteLiteral(r))
		fmt.Fprintf(&roles, "ALTER ROLE %s LOGIN NOCREATEDB NOCREATEROLE PASSWORD %s;\n", quoteIdent(r), quoteLiteral(pw))
	}
	fmt.Fprintf(&roles, "REVOKE CREATE ON SCHEMA public FROM PUBLIC;\nREVOKE ALL ON DATABASE %s FROM PUBLIC;\n", quoteIdent(s.cfg.Database))
	for _, r := range s.roles()[1:] {
		fmt.Fprintf(&roles, "GRANT CONNECT ON DATABASE %s TO %s;\n", quoteIdent(s.cfg.Database), quoteIdent(r))
	}
	if err := s.psql(ctx, s.cfg.Database, guardSQL+roles.String()); err != nil {
		return err
	}
	if err := s.createCollections(ctx); err != nil {
		return err
	}
	if err := s.psql(ctx, s.cfg.Database, GrantsSQL(s.cfg.Database, s.cfg.Users)); err != nil {
		return err
	}
	for _, r := range s.roles() {
		uri, err := s.URI(r)
		if err != nil {
			return err
		}
		if err := os.WriteFile(s.URIFile(r), []byte(uri+"\n"), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// createCollections makes every declared collection, as the administrator
// through FerretDB: only FerretDB knows how it lays a collection out.
func (s *Server) createCollections(ctx context.Context) error {
	uri, err := s.URI(AdminRole)
	if err != nil {
		return err
	}
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		return errors.New("store server: connect as admin")
	}
	defer func() { _ = c.Disconnect(context.WithoutCancel(ctx)) }()
	db := c.Database(s.cfg.Database)
	have, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("store server: list collections: %w", err)
	}
	for _, u := range s.cfg.Users {
		for _, coll := range u.Collections {
			if contains(have, coll) {
				continue
			}
			if err := db.CreateCollection(ctx, coll); err != nil {
				return fmt.Errorf("store server: create collection %s: %w", coll, err)
			}
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// psql runs script in database db as the administrator; the password
// goes in a 0600 passfile, never a flag or the environment's PGPASSWORD.
func (s *Server) psql(ctx context.Context, db, script string) error {
	pw, err := s.password(AdminRole)
	if err != nil {
		return err
	}
	pass := filepath.Join(s.cfg.Dir, secretsDir, "pgpass")
	line := fmt.Sprintf("127.0.0.1:%d:*:%s:%s\n", s.st.PGPort, AdminRole, pw)
	if err := os.WriteFile(pass, []byte(line), 0o600); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.pgBin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
		"-h", "127.0.0.1", "-p", strconv.Itoa(s.st.PGPort), "-U", AdminRole, "-d", db, "-f", "-")
	cmd.Env = append(os.Environ(), "PGPASSFILE="+pass, "PGCONNECT_TIMEOUT=10")
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		// psql's messages name statements, not their literals' values.
		return fmt.Errorf("store server: psql on %s: %w: %s", db, err, redact(string(out), pw))
	}
	return nil
}

func redact(s, secret string) string { return strings.ReplaceAll(s, secret, "<redacted>") }

// URI is role's MongoDB URI: PLAIN (FerretDB hands the login to
// PostgreSQL) over TLS verified with CAFile. It holds the password: write
// it to a 0600 file, never log it.
func (s *Server) URI(role string) (string, error) {
	pw, err := s.password(role)
	if err != nil {
		return "", err
	}
	q := url.Values{"authMechanism": {"PLAIN"}, "tls": {"true"}, "tlsCAFile": {s.CAFile()}}
	u := url.URL{Scheme: "mongodb", User: url.UserPassword(role, pw), Host: s.Addr(), Path: "/", RawQuery: q.Encode()}
	return u.String(), nil
}

// URIFile is where Provision writes role's URI (0600).
func (s *Server) URIFile(role string) string {
	return filepath.Join(s.cfg.Dir, uriDir, role+".uri")
}
