package app

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/secrets"
	"github.com/dcm-project/dcm/platform/server"
)

// loadTLS reads the configured certificate files, or, with none
// configured, the local PKI under the data dir, made on first start, with
// the certificate of the program named name (issued on its first start).
// A program's identity is its certificate's common name: with configured
// files, one naming another program is refused; the all-in-one program's
// ("dcm", every service's rights) is taken with a warning.
func loadTLS(name string, cfg *server.Config, log *zap.Logger) (*pki.TLS, error) {
	set := 0
	for _, f := range []string{cfg.TLSCAFile, cfg.TLSCertFile, cfg.TLSKeyFile} {
		if f != "" {
			set++
		}
	}
	if (cfg.HTTPTLSCertFile == "") != (cfg.HTTPTLSKeyFile == "") {
		return nil, errors.New("DCM_HTTP_TLS_CERT_FILE and DCM_HTTP_TLS_KEY_FILE go together: set both or neither")
	}
	var files pki.Files
	switch set {
	case 3:
		files = pki.Files{CA: cfg.TLSCAFile, Cert: cfg.TLSCertFile, Key: cfg.TLSKeyFile}
	case 0:
		if cfg.TLSServiceCAFile != "" {
			return nil, errors.New("DCM_TLS_SERVICE_CA_FILE goes with DCM_TLS_CA_FILE, DCM_TLS_CERT_FILE and DCM_TLS_KEY_FILE: the local PKI's service CA is its own CA")
		}
		dir, err := filepath.Abs(filepath.Join(cfg.DataDir, "pki"))
		if err != nil {
			return nil, err
		}
		if files, err = localPKI(dir, name, cfg, log); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("DCM_TLS_CA_FILE, DCM_TLS_CERT_FILE and DCM_TLS_KEY_FILE go together: set all three or none")
	}
	files.ServiceCA = cfg.TLSServiceCAFile
	if cfg.HTTPTLSCertFile != "" {
		files.HTTPCert, files.HTTPKey = cfg.HTTPTLSCertFile, cfg.HTTPTLSKeyFile
	}
	t, err := pki.Load(files)
	if err != nil {
		return nil, err
	}
	if err := t.OwnServiceError(); err != nil {
		return nil, fmt.Errorf("DCM_TLS_CERT_FILE %s: %w", files.Cert, err)
	}
	switch cn := t.Identity().Subject; cn {
	case name:
	case pki.AllInOne:
		log.Warn("this program's certificate is the all-in-one program's (common name "+pki.AllInOne+"), which may call "+
			"every method that declares callers: give it its own, with the common name "+name, zap.String("setting", "DCM_TLS_CERT_FILE"))
	default:
		return nil, fmt.Errorf("DCM_TLS_CERT_FILE %s: its common name is %q: the program %s serves and dials as %q (or %q, the all-in-one program)",
			files.Cert, cn, name, name, pki.AllInOne)
	}
	return t, nil
}

// localPKI makes the local PKI under dir on first start, and the
// certificates of the program named name on its first start there.
func localPKI(dir, name string, cfg *server.Config, log *zap.Logger) (pki.Files, error) {
	hosts := hostsOf(cfg)
	created, err := pki.Bootstrap(dir, hosts)
	if err != nil {
		return pki.Files{}, fmt.Errorf("local PKI: %w", err)
	}
	if created {
		msg := fmt.Sprintf("first start: wrote a local CA (%[1]s/ca.crt), the programs' certificates, "+
			"an admin client certificate (%[1]s/admin.crt, admin.key) and an admin token (%[1]s/admin.token)", dir)
		fmt.Fprintln(os.Stderr, msg)
		log.Info(msg)
	} else {
		// A restart says it too: whoever started it may not have the first run's output.
		log.Info(fmt.Sprintf("local PKI in %[1]s: CA %[1]s/ca.crt, admin client certificate %[1]s/admin.crt (admin.key), admin token %[1]s/admin.token", dir))
	}
	if err := pki.IssueProgram(dir, name, hosts); err != nil {
		return pki.Files{}, fmt.Errorf("local PKI: certificate of %s: %w", name, err)
	}
	if err := pki.IssueHTTPS(dir, hosts); err != nil {
		return pki.Files{}, fmt.Errorf("local PKI: HTTPS certificate: %w", err)
	}
	if cfg.AdminTokenFile == "" {
		cfg.AdminTokenFile = filepath.Join(dir, pki.AdminTokenFile)
	}
	return pki.ProgramFiles(dir, name), nil
}

// hostsOf are the names the local server certificate is valid for:
// loopback, this host, and the hosts of the listen addresses.
func hostsOf(cfg *server.Config) []string {
	hosts := pki.DefaultHosts()
	for _, addr := range []string{cfg.GRPCAddr, cfg.HTTPAddr} {
		h, _, err := net.SplitHostPort(addr)
		if err != nil || h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			continue
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// loadKeyring reads the key-encryption keyring from DCM_KEK or
// DCM_KEK_FILE, or from DataDir/kek, made with one fresh key on first start.
func loadKeyring(cfg *server.Config, log *zap.Logger) (*secrets.Keyring, error) {
	if cfg.KEK != "" && cfg.KEKFile != "" {
		return nil, errors.New("set DCM_KEK or DCM_KEK_FILE, not both")
	}
	if cfg.KEK != "" {
		k, err := secrets.ParseKeyring(cfg.KEK)
		if err != nil {
			return nil, fmt.Errorf("DCM_KEK: %w", err)
		}
		return k, nil
	}
	path := cfg.KEKFile
	if path == "" {
		path = filepath.Join(cfg.DataDir, "kek")
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		switch {
		case err == nil:
			_, err = f.WriteString(secrets.NewKeyLine("k1"))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, fmt.Errorf("write %s: %w", path, err)
			}
			log.Info("first start: wrote a key-encryption key for secrets at rest", zap.String("path", path))
		case !errors.Is(err, fs.ErrExist):
			return nil, err
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read keyring: %w", err)
	}
	k, err := secrets.ParseKeyring(string(b))
	if err != nil {
		return nil, fmt.Errorf("keyring %s: %w", path, err)
	}
	return k, nil
}

// readAdminToken reads the bootstrap admin token, if there is one.
func readAdminToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 {
		return "", fmt.Errorf("admin token in %s is shorter than 32 characters", path)
	}
	return tok, nil
}
