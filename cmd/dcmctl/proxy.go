package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// loopbackListen checks that addr (host:port) names a loopback address and
// returns the address to listen on: the proxy hands out the context's
// credential to whoever reaches it, so it never listens beyond the host.
// "localhost" is 127.0.0.1; an empty host (":8081") is every interface
// and refused.
func loopbackListen(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("proxy: --listen %q is not host:port: %w", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return "", fmt.Errorf("proxy: --listen %q is not a loopback address: the proxy speaks plain HTTP and adds a credential, so it listens on 127.0.0.1, [::1] or localhost only", addr)
	}
	return net.JoinHostPort(ip.String(), port), nil
}

// newProxy forwards every request to the context's server over TLS (the
// context's CA, client certificate) and streams the answers as they come.
// The context's bearer token goes on every request that carries no
// Authorization header of its own (emcoctl -t sends one).
func newProxy(ctx *Context, logw io.Writer) (http.Handler, error) {
	u, err := url.Parse(ctx.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("proxy: server %q is not https://host:port: the proxy exists to put TLS in front of plain-HTTP clients", ctx.Server)
	}
	tr, err := transport(ctx)
	if err != nil {
		return nil, err
	}
	token := ctx.Token
	prefix := strings.TrimRight(u.Path, "/")
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "https", u.Host
			r.Out.URL.Path = prefix + r.In.URL.Path
			r.Out.URL.RawPath = ""
			if r.In.URL.RawPath != "" {
				r.Out.URL.RawPath = prefix + r.In.URL.RawPath
			}
			r.Out.Host = u.Host
			if token != "" && r.Out.Header.Get("Authorization") == "" {
				r.Out.Header.Set("Authorization", "Bearer "+token)
			}
		},
		Transport: tr,
		// Flush at once: a status watch (?watch=true) is a stream of
		// messages the client reads as they come.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			say(logw, "dcmctl proxy: %s %s: %s\n", r.Method, r.URL.Path, oneLine(err.Error()))
			http.Error(w, "dcmctl proxy: the gateway "+u.Host+" did not answer: "+oneLine(err.Error()), http.StatusBadGateway)
		},
	}, nil
}

// credentialOf names what the proxy adds, for its first line of output.
func credentialOf(ctx *Context) string {
	switch {
	case ctx.Cert != "":
		return "client certificate " + ctx.Cert
	case ctx.Token != "":
		return "bearer token (on requests without an Authorization header)"
	}
	return "none: each request's own Authorization header"
}

func proxyCmd(g *globals) *cobra.Command {
	var listen string
	var noCredential bool
	cmd := &cobra.Command{
		Use:   "proxy [--listen 127.0.0.1:8081]",
		Short: "serve plain HTTP on a loopback address and forward every request to the gateway over TLS",
		Long: `proxy puts TLS in front of a client that speaks plain HTTP only, such as
EMCO's emcoctl: it listens on a loopback address (127.0.0.1, [::1] or
localhost; any other is refused) and forwards every request to the
context's server over HTTPS, verifying the gateway's certificate with the
context's CA. It adds the context's client certificate, or its bearer
token ($DCMCTL_TOKEN when set) to each request that carries no
Authorization header of its own. Answers are streamed as they come
(status watches). Any process of the host that reaches the address uses
the credential: with --no-credential the proxy adds none, and each client
sends its own token (emcoctl -t).`,
		Example: `  dcmctl proxy                                     # http://127.0.0.1:8081 -> the current context
  dcmctl --context alice proxy --listen 127.0.0.1:9077
  dcmctl proxy --no-credential &  emcoctl --config emco-cfg.yaml apply -f prerequisites.yaml -v values.yaml -t "$TOKEN"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			addr, err := loopbackListen(listen)
			if err != nil {
				return err
			}
			ctx, err := g.credential()
			if err != nil {
				return err
			}
			if noCredential {
				c := *ctx
				c.Token, c.Cert, c.Key = "", "", ""
				ctx = &c
			}
			h, err := newProxy(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("proxy: %w", err)
			}
			say(cmd.OutOrStdout(), "dcmctl proxy: http://%s -> %s (credential: %s)\n", ln.Addr(), ctx.Server, credentialOf(ctx))
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
			stop, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			go func() {
				<-stop.Done()
				shut, done := context.WithTimeout(context.Background(), 5*time.Second)
				defer done()
				_ = srv.Shutdown(shut)
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("proxy: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8081", "loopback address to serve plain HTTP on (127.0.0.1, [::1] or localhost; port 0 picks one)")
	cmd.Flags().BoolVar(&noCredential, "no-credential", false, "add no credential: forward each request's own Authorization header only")
	return cmd
}
