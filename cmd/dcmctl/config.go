package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Config is the config file: named contexts, one current.
type Config struct {
	CurrentContext string              `json:"current-context"`
	Contexts       map[string]*Context `json:"contexts"`
}

// Context is one installation and the credential to reach it: a bearer
// token or a client certificate and key (file paths).
type Context struct {
	Server string `json:"server"`
	CA     string `json:"ca,omitempty"`
	Token  string `json:"token,omitempty"`
	Cert   string `json:"cert,omitempty"`
	Key    string `json:"key,omitempty"`
}

// configPath is the config file: --config, $DCMCTL_CONFIG, else
// ~/.config/dcm/config.yaml.
func (g *globals) configPath() (string, error) {
	if g.config != "" {
		return g.config, nil
	}
	if p := os.Getenv("DCMCTL_CONFIG"); p != "" {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("config: no home directory (set --config or DCMCTL_CONFIG): %w", err)
	}
	return filepath.Join(home, ".config", "dcm", "config.yaml"), nil
}

// loadConfig reads the config file; a missing one is an empty config.
func loadConfig(path string) (*Config, error) {
	c := &Config{Contexts: map[string]*Context{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := yaml.UnmarshalStrict(b, c); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if c.Contexts == nil {
		c.Contexts = map[string]*Context{}
	}
	return c, nil
}

// save writes the config file with mode 0600 (it may hold a token).
func (c *Config) save(path string) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return os.Chmod(path, 0o600) // an existing file keeps its mode on write
}

// localInstall is the context of the local `make run` install: its PKI
// under $DCM_DATA_DIR/pki (default .dcm/pki) and its REST address.
func localInstall() (*Context, error) {
	dir := os.Getenv("DCM_DATA_DIR")
	if dir == "" {
		dir = ".dcm"
	}
	pki := filepath.Join(dir, "pki")
	for _, f := range []string{"ca.crt", "admin.crt", "admin.key"} {
		if _, err := os.Stat(filepath.Join(pki, f)); err != nil {
			return nil, fmt.Errorf("no config file and no local install (%s): run `dcmctl login` or `make run` first", filepath.Join(pki, f))
		}
	}
	addr := os.Getenv("DCM_HTTP_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	return &Context{Server: "https://" + addr, CA: filepath.Join(pki, "ca.crt"),
		Cert: filepath.Join(pki, "admin.crt"), Key: filepath.Join(pki, "admin.key")}, nil
}

// current is the context to use: --context, else the config's current
// one, else the local install when the config file has no contexts.
func (g *globals) current() (*Context, error) {
	path, err := g.configPath()
	if err != nil {
		return nil, err
	}
	c, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	name := g.context
	if name == "" {
		name = c.CurrentContext
	}
	if name == "" && len(c.Contexts) == 0 {
		return localInstall()
	}
	ctx, ok := c.Contexts[name]
	if !ok {
		names := make([]string, 0, len(c.Contexts))
		for n := range c.Contexts {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("no context %q in %s (have: %s)", name, path, strings.Join(names, ", "))
	}
	return ctx, nil
}

// readToken reads a bearer token from a file, or from stdin for "-": the
// first line, trimmed.
func readToken(file string, stdin io.Reader) (string, error) {
	var b []byte
	var err error
	if file == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 64<<10))
	} else {
		b, err = os.ReadFile(file)
	}
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", fmt.Errorf("--token-file: no token in %s", file)
	}
	return tok, nil
}

func loginCmd(g *globals) *cobra.Command {
	var ctx Context
	var name, tokenFile string
	cmd := &cobra.Command{
		Use:   "login --server URL --ca FILE (--token-file FILE|- | $DCMCTL_TOKEN | --cert FILE --key FILE)",
		Short: "write a context to the config file (mode 0600) and make it current",
		Example: `  dcmctl login --server https://127.0.0.1:8080 --ca .dcm/pki/ca.crt --cert .dcm/pki/admin.crt --key .dcm/pki/admin.key
  dcmctl login --context prod --server https://dcm.example:8080 --ca ca.crt --token-file token
  dcmctl token create --subject alice --role reader | dcmctl login --context alice --server https://127.0.0.1:8080 --ca .dcm/pki/ca.crt --token-file -
  DCMCTL_TOKEN="$(cat token)" dcmctl login --context prod --server https://dcm.example:8080 --ca ca.crt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ctx.Server == "" {
				return errors.New("login: --server is required")
			}
			if tokenFile != "" {
				if ctx.Token != "" {
					return errors.New("login: give --token-file or --token, not both")
				}
				tok, err := readToken(tokenFile, cmd.InOrStdin())
				if err != nil {
					return fmt.Errorf("login: %w", err)
				}
				ctx.Token = tok
			}
			if ctx.Token == "" && ctx.Cert == "" && ctx.Key == "" {
				ctx.Token = strings.TrimSpace(os.Getenv(tokenEnv))
			}
			if (ctx.Token == "") == (ctx.Cert == "" && ctx.Key == "") {
				return errors.New("login: give either a token (--token-file, $DCMCTL_TOKEN) or --cert and --key")
			}
			if (ctx.Cert == "") != (ctx.Key == "") {
				return errors.New("login: --cert and --key go together")
			}
			for _, p := range []*string{&ctx.CA, &ctx.Cert, &ctx.Key} {
				if *p != "" {
					abs, err := filepath.Abs(*p)
					if err != nil {
						return err
					}
					if _, err := os.Stat(abs); err != nil {
						return fmt.Errorf("login: %w", err)
					}
					*p = abs
				}
			}
			if name == "" {
				name = g.context
			}
			if name == "" {
				name = "default"
			}
			// Check the server and the credential before writing them: any
			// answer but 401 will do (a reader of one project may be refused
			// the list of projects, 403, and still be who it says).
			c, err := newClient(&ctx)
			if err != nil {
				return err
			}
			projects, err := routeURL("GET", rpcListProjects, nil)
			if err != nil {
				return err
			}
			if _, err := c.do("GET", projects+"?page-size=1", nil, nil); err != nil {
				if _, answered := err.(*apiError); !answered || isStatus(err, http.StatusUnauthorized) {
					return fmt.Errorf("login: %w", err)
				}
			}
			path, err := g.configPath()
			if err != nil {
				return err
			}
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			cfg.Contexts[name] = &ctx
			cfg.CurrentContext = name
			if err := cfg.save(path); err != nil {
				return err
			}
			say(cmd.OutOrStdout(), "context %q (%s) written to %s\n", name, ctx.Server, path)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&ctx.Server, "server", "", "the gateway's URL (https://host:port)")
	f.StringVar(&ctx.CA, "ca", "", "CA certificate file that signed the gateway's certificate (default: the system's)")
	f.StringVar(&tokenFile, "token-file", "", "file holding the bearer token (dcmctl token create, or .dcm/pki/admin.token); - reads it from stdin")
	f.StringVar(&ctx.Token, "token", "", "bearer token; other users of the host see it in ps: prefer --token-file or $DCMCTL_TOKEN")
	f.StringVar(&ctx.Cert, "cert", "", "client certificate file")
	f.StringVar(&ctx.Key, "key", "", "client key file")
	f.StringVar(&name, "name", "", "context name (default --context, else \"default\")")
	return cmd
}
