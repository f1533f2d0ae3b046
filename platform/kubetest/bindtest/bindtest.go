// Package bindtest starts a real BIND name server (named, Debian's bind9)
// on loopback for tests: one primary zone that accepts RFC 2136 updates and
// zone transfers signed by a TSIG key generated for the test, which is what
// external-dns's rfc2136 provider needs. Answers are read back with dig, so
// a test proves what a real resolver would see.
//
// It must not be imported by product code.
package bindtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a running named serving Zone on 127.0.0.1:Port.
type Server struct {
	// Addr is "127.0.0.1"; Port the UDP and TCP port named listens on.
	Addr string
	Port int
	// Zone is the zone named is primary for, without a trailing dot.
	Zone string
	// KeyName is the TSIG key's name; Secret its base64 secret
	// (hmac-sha256). Updates and transfers need it.
	KeyName, Secret string

	dir string
	dig string
}

// Start starts named in a temporary directory and waits until it answers
// for the zone; it is stopped when the test ends. Without named (or dig) the
// test is skipped, unless CI is set: there, a missing server is a failure.
func Start(t testing.TB) *Server {
	t.Helper()
	named := lookPath("named", "/usr/sbin/named")
	dig := lookPath("dig", "/usr/bin/dig")
	if named == "" || dig == "" {
		msg := "needs BIND's named and dig (Debian packages bind9 and bind9-dnsutils)"
		if os.Getenv("CI") != "" {
			t.Fatalf("%s, and CI is set: they must be installed", msg)
		}
		t.Skip(msg + "; not installed")
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatalf("tsig key: %v", err)
	}
	s := &Server{Addr: "127.0.0.1", Zone: "example.com", KeyName: "dcm-test-key",
		Secret: base64.StdEncoding.EncodeToString(key), dir: t.TempDir(), dig: dig}
	port, err := freeUDPTCPPort()
	if err != nil {
		t.Fatalf("free port for named: %v", err)
	}
	s.Port = port
	if err := s.writeConfig(); err != nil {
		t.Fatalf("named config: %v", err)
	}
	// -g: foreground, log to stderr; -n 1: one worker thread (tests share
	// two cores); root is fine in a test container, so no -u.
	logf, err := os.Create(filepath.Join(s.dir, "named.log"))
	if err != nil {
		t.Fatalf("named log: %v", err)
	}
	cmd := exec.Command(named, "-g", "-n", "1", "-c", filepath.Join(s.dir, "named.conf"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		t.Fatalf("start named: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	if err := s.waitReady(done); err != nil {
		b, _ := os.ReadFile(filepath.Join(s.dir, "named.log"))
		t.Fatalf("named did not start: %v\n%s", err, b)
	}
	return s
}

// Lookup asks named for name's records of type typ with dig +short and
// returns the answer's lines (none when there is no such record).
func (s *Server) Lookup(t testing.TB, name, typ string) []string {
	t.Helper()
	out, err := s.query(name, typ)
	if err != nil {
		t.Fatalf("dig %s %s: %v", name, typ, err)
	}
	return out
}

func (s *Server) query(name, typ string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// +tries=1 +time=2: a lost UDP answer is retried by the caller, not
	// hidden behind dig's default of three tries of five seconds.
	cmd := exec.CommandContext(ctx, s.dig, "@"+s.Addr, "-p", strconv.Itoa(s.Port),
		"+short", "+tries=1", "+time=2", name, typ)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s%s", err, b, stderr.Bytes())
	}
	var out []string
	for l := range strings.Lines(string(b)) {
		if l = strings.TrimSpace(l); l != "" {
			if strings.HasPrefix(l, ";;") {
				// dig reports failures (timeouts, refusals) on stdout.
				return nil, errors.New(l)
			}
			out = append(out, l)
		}
	}
	return out, nil
}

func (s *Server) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := s.query(s.Zone, "SOA")
		if err == nil && len(out) == 1 {
			return nil
		}
		select {
		case <-exited:
			return errors.New("named exited")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no SOA answer for %s after 30s (last: %v %v)", s.Zone, out, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *Server) writeConfig() error {
	q := func(p string) string { return strconv.Quote(filepath.Join(s.dir, p)) }
	conf := fmt.Sprintf(`options {
	directory %[1]s;
	pid-file %[2]s;
	session-keyfile %[3]s;
	managed-keys-directory %[1]s;
	listen-on port %[4]d { 127.0.0.1; };
	listen-on-v6 { none; };
	recursion no;
	dnssec-validation no;
	notify no;
};
controls { };
key %[5]q {
	algorithm hmac-sha256;
	secret %[6]q;
};
zone %[7]q {
	type primary;
	file %[8]s;
	journal %[9]s;
	allow-update { key %[5]q; };
	allow-transfer { key %[5]q; };
};
`, strconv.Quote(s.dir), q("named.pid"), q("session.key"), s.Port, s.KeyName, s.Secret,
		s.Zone, q("zone.db"), q("zone.db.jnl"))
	zone := fmt.Sprintf(`$TTL 60
@	IN SOA ns.%[1]s. hostmaster.%[1]s. 1 60 60 600 60
@	IN NS ns.%[1]s.
ns	IN A 127.0.0.1
`, s.Zone)
	if err := os.WriteFile(filepath.Join(s.dir, "named.conf"), []byte(conf), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.dir, "zone.db"), []byte(zone), 0o600)
}

// freeUDPTCPPort finds a loopback port free for both TCP and UDP (named
// listens on both), held while checking so the two agree.
func freeUDPTCPPort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		_ = l.Close()
		if err != nil {
			continue
		}
		_ = u.Close()
		return port, nil
	}
	return 0, errors.New("no port free for both TCP and UDP after 20 tries")
}

func lookPath(name, fallback string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if st, err := os.Stat(fallback); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
		return fallback
	}
	return ""
}
