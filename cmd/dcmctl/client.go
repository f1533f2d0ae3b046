package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// client calls the gateway.
type client struct {
	server string
	token  string
	http   *http.Client
	// stream has no overall timeout, for status watches.
	stream *http.Client
}

// apiError is the gateway's error body.
type apiError struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Field   string `json:"field"`
	Reason  string `json:"reason"`
	// NotFound-ish checks read the HTTP status.
	HTTP int `json:"-"`
}

func (e *apiError) Error() string {
	s := e.Message
	if e.Status != "" {
		s = e.Status + ": " + s
	}
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return fmt.Sprintf("%s [HTTP %d]", s, e.HTTP)
}

// isStatus reports whether err is the server's answer with HTTP status code.
func isStatus(err error, code int) bool {
	e, ok := err.(*apiError)
	return ok && e.HTTP == code
}

// checkServer refuses a server URL that is not http(s)://host, and
// http:// when a credential would go with it: a bearer token in clear
// text is anyone's on the path (the gateway's DCM_INSECURE_HTTP, loopback
// only, is for curl in development).
func checkServer(ctx *Context) error {
	u, err := url.Parse(ctx.Server)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("server: %q is not a URL https://host:port", ctx.Server)
	}
	if u.Scheme == "http" && (ctx.Token != "" || ctx.Cert != "") {
		return fmt.Errorf("server: %s is http://: dcmctl sends a credential only over https://", ctx.Server)
	}
	return nil
}

func newClient(ctx *Context) (*client, error) {
	if err := checkServer(ctx); err != nil {
		return nil, err
	}
	tr, err := transport(ctx)
	if err != nil {
		return nil, err
	}
	// A redirect never takes the token off https.
	redirect := func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" && ctx.Token != "" {
			return fmt.Errorf("redirected to %s: dcmctl sends a credential only over https://", req.URL.Redacted())
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	return &client{server: strings.TrimRight(ctx.Server, "/"), token: ctx.Token,
		http:   &http.Client{Transport: tr, Timeout: 60 * time.Second, CheckRedirect: redirect},
		stream: &http.Client{Transport: tr, CheckRedirect: redirect}}, nil
}

// transport speaks TLS to the context's server: its CA (else the
// system's), its client certificate when it has one.
func transport(ctx *Context) (*http.Transport, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ctx.CA != "" {
		pem, err := os.ReadFile(ctx.CA)
		if err != nil {
			return nil, fmt.Errorf("ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca: no certificate in %s", ctx.CA)
		}
		cfg.RootCAs = pool
	}
	if ctx.Cert != "" {
		pair, err := tls.LoadX509KeyPair(ctx.Cert, ctx.Key)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return &http.Transport{TLSClientConfig: cfg, Proxy: http.ProxyFromEnvironment}, nil
}

// tokenEnv names the environment variable that holds a bearer token: it
// keeps the token out of the command line (ps, shell history).
const tokenEnv = "DCMCTL_TOKEN"

func (g *globals) client() (*client, error) {
	ctx, err := g.credential()
	if err != nil {
		return nil, err
	}
	return newClient(ctx)
}

// credential is the current context, with $DCMCTL_TOKEN, when set, as its
// credential.
func (g *globals) credential() (*Context, error) {
	ctx, err := g.current()
	if err != nil {
		return nil, err
	}
	if tok := strings.TrimSpace(os.Getenv(tokenEnv)); tok != "" {
		// The token in the environment is the credential: the context
		// gives the server and the CA.
		c := *ctx
		c.Token, c.Cert, c.Key = tok, "", ""
		ctx = &c
	}
	return ctx, nil
}

// request builds a request to path (under the server) with a JSON body
// (nil: none; []byte: sent as is).
func (c *client) request(method, path string, body any, header http.Header) (*http.Request, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, c.server+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// do sends a request and returns the answer's body; a status >= 400 is an
// *apiError with the server's message.
func (c *client) do(method, path string, body any, header http.Header) ([]byte, error) {
	req, err := c.request(method, path, body, header)
	if err != nil {
		return nil, err
	}
	return c.send(req)
}

func (c *client) send(req *http.Request) ([]byte, error) {
	b, _, err := c.sendHeader(req)
	return b, err
}

// sendHeader is send that also returns the answer's header.
func (c *client) sendHeader(req *http.Request) ([]byte, http.Header, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode >= 400 {
		return nil, nil, errorOf(resp.StatusCode, b)
	}
	return b, resp.Header, nil
}

// list reads every page of a collection (page-size 1000, following the
// Next-Page-Token header); wrapper is the key of the array in a wrapped
// answer ("" for a bare array); filter adds query parameters (state).
func (c *client) list(path, wrapper string, filter url.Values) ([]any, error) {
	items := []any{}
	token := ""
	for {
		q := url.Values{"page-size": {"1000"}}
		for k, v := range filter {
			q[k] = v
		}
		if token != "" {
			q.Set("page-token", token)
		}
		req, err := c.request("GET", path+"?"+q.Encode(), nil, nil)
		if err != nil {
			return nil, err
		}
		b, h, err := c.sendHeader(req)
		if err != nil {
			return nil, err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("GET %s: not JSON: %w", path, err)
		}
		if wrapper != "" {
			v = lookup(v, wrapper)
		}
		page, _ := v.([]any)
		items = append(items, page...)
		if token = h.Get("Next-Page-Token"); token == "" {
			return items, nil
		}
	}
}

// errorOf reads the gateway's error body (or, failing that, the text).
func errorOf(code int, b []byte) *apiError {
	e := &apiError{}
	if json.Unmarshal(b, e) != nil || e.Message == "" {
		e = &apiError{Message: strings.TrimSpace(string(b))}
		if e.Message == "" {
			e.Message = http.StatusText(code)
		}
	}
	e.HTTP = code
	return e
}

// getJSON reads path into a decoded JSON value.
func (c *client) getJSON(path string, header http.Header) (any, error) {
	b, err := c.do("GET", path, nil, header)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("GET %s: not JSON: %w", path, err)
	}
	return v, nil
}

// oneLine folds a message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// say prints to a command's output; a failed write to a terminal or pipe
// has no one left to tell.
func say(w io.Writer, format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
