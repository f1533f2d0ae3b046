package allinone_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// proxyLine is dcmctl proxy's first line: the address it listens on.
var proxyLine = regexp.MustCompile(`^dcmctl proxy: (http://127\.0\.0\.1:[0-9]+) -> `)

// startProxy runs `dcmctl proxy --listen 127.0.0.1:0` with env added to
// d's and returns the plain-HTTP base URL it prints; it is stopped when the
// test ends.
func (d *dcmctl) startProxy(env []string, args ...string) string {
	d.t.Helper()
	cmd := exec.Command(d.bin, append([]string{"proxy", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Dir = d.dir
	cmd.Env = append(append(os.Environ(), d.env...), env...)
	out, err := cmd.StdoutPipe()
	require.NoError(d.t, err)
	cmd.Stderr = io.Discard
	require.NoError(d.t, cmd.Start())
	d.t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(d.t, err, "dcmctl proxy's first line: %q", line)
	m := proxyLine.FindStringSubmatch(line)
	require.NotNil(d.t, m, "dcmctl proxy's first line: %q", line)
	return m[1]
}

// bearer adds a bearer token to every request, as emcoctl -t does.
type bearer string

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(req)
}

// plain sends a plain-HTTP request (as emcoctl does), with token as its
// own bearer token unless empty; it returns the status and the body.
func plain(t *testing.T, method, u, body, token string) (int, string) {
	t.Helper()
	c := http.DefaultClient
	if token != "" {
		c = &http.Client{Transport: bearer(token)}
	}
	code, b := apitest.Call(t, c, method, u, body)
	return code, string(b)
}

// firstWatched reads the first message of a status watch stream.
func firstWatched(t *testing.T, body io.Reader) *apitest.LCStatus {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 16<<20)
	require.True(t, sc.Scan(), "a first status before the watch ends: %v", sc.Err())
	var line struct {
		Result *apitest.LCStatus `json:"result"`
	}
	require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "%s", sc.Text())
	require.NotNil(t, line.Result, "%s", sc.Text())
	return line.Result
}

// TestDcmctlProxy runs `dcmctl proxy` (the TLS in front of emcoctl, which
// speaks plain HTTP) against the whole program in EMCO's dialect: a plain
// request reaches the gateway with the proxy's credential (its client
// certificate, or its token, unless the request brings its own), a
// non-loopback listen address is refused, and a status watch is streamed
// through it as it comes. Not parallel: it stops one test cluster's API
// server so that the watched logical cloud never settles.
func TestDcmctlProxy(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	s := stacktest.StartWith(t, stacktest.Options{Args: []string{"-gateway-dialect", "emco"}})
	dir := t.TempDir()
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	// No config file: the local install, as its admin (client certificate).
	d := &dcmctl{t: t, bin: buildDcmctl(t, dir), dir: dir, env: []string{"HOME=" + dir,
		"DCMCTL_CONFIG=" + filepath.Join(dir, "config.yaml"), "DCM_DATA_DIR=" + s.DataDir, "DCM_HTTP_ADDR=" + u.Host}}

	t.Run("a non-loopback listen address is refused", func(t *testing.T) {
		d := *d
		d.t = t
		for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8081", "example.com:8081", "[::]:0"} {
			out, errOut, code := d.run("", "proxy", "--listen", addr)
			require.Equal(t, 1, code, "--listen %s: %s%s", addr, out, errOut)
			require.Equal(t, `error: proxy: --listen "`+addr+`" is not a loopback address: the proxy speaks plain HTTP and adds a credential, so it listens on 127.0.0.1, [::1] or localhost only`+"\n", errOut)
			require.Empty(t, out)
		}
	})

	t.Run("the proxy's client certificate", func(t *testing.T) {
		d := *d
		d.t = t
		base := d.startProxy(nil)
		code, body := plain(t, "POST", base+"/v2/projects", `{"metadata":{"name":"px"}}`, "")
		require.Equal(t, 201, code, body)
		code, body = plain(t, "GET", base+"/v2/projects/px", "", "")
		require.Equal(t, 200, code, body)
		require.JSONEq(t, `{"metadata":{"name":"px","description":"","userData1":"","userData2":""}}`, body)
		// the gateway's own answers come through as they are
		code, body = plain(t, "GET", base+"/v2/projects/nope", "", "")
		require.Equal(t, 404, code, body)
		require.Contains(t, body, `"status":"NotFound"`)
	})

	t.Run("no credential: the request's own", func(t *testing.T) {
		d := *d
		d.t = t
		base := d.startProxy(nil, "--no-credential")
		code, body := plain(t, "GET", base+"/v2/projects", "", "")
		require.Equal(t, 401, code, "the proxy added nothing: %s", body)
		code, body = plain(t, "GET", base+"/v2/projects/px", "", s.AdminToken)
		require.Equal(t, 200, code, body)
	})

	t.Run("the proxy's token, unless the request brings its own", func(t *testing.T) {
		d := *d
		d.t = t
		reader := strings.TrimSpace(d.ok("token", "create", "--subject", "proxy-reader", "--role", "reader", "--project", "px", "--ttl", "1h"))
		base := d.startProxy([]string{"DCMCTL_TOKEN=" + reader})
		code, body := plain(t, "GET", base+"/v2/projects/px/logical-clouds", "", "")
		require.Equal(t, 200, code, body)
		lc := `{"metadata":{"name":"by-reader"},"spec":{"namespace":"by-reader"}}`
		code, body = plain(t, "POST", base+"/v2/projects/px/logical-clouds", lc, "")
		require.Equal(t, 403, code, "the reader's token went with it: %s", body)
		code, body = plain(t, "POST", base+"/v2/projects/px/logical-clouds", lc, s.AdminToken)
		require.Equal(t, 201, code, "the request's own token (emcoctl -t) went instead: %s", body)
	})

	t.Run("a status watch is streamed", func(t *testing.T) {
		d := *d
		d.t = t
		down := h.Clusters[2]
		down.StopAPIServer()
		t.Cleanup(func() { require.NoError(t, down.StartAPIServer(context.Background())) })
		r := apitest.NewREST(t, s)
		apitest.RegisterHarness(t, r, h)
		lc := "/v2/projects/px/logical-clouds/lc-w"
		r.Want(201, "POST", "/v2/projects/px/logical-clouds", `{"metadata":{"name":"lc-w"},"spec":{"namespace":"proxy-watch"}}`)
		r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+down.Name+`"}`)
		r.Want(202, "POST", lc+"/apply", "")

		base := d.startProxy(nil)
		// The logical cloud never settles (its cluster is down), so the
		// watch stays open: its first message arrives only if the proxy
		// passes it on as it comes.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", base+lc+"/status?watch=true", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "Instantiating", firstWatched(t, resp.Body).State)
		require.NoError(t, ctx.Err(), "the first message came before the deadline")
	})
}
