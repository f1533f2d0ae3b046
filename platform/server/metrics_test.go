package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
)

// TestMetricsListener: DCM_METRICS_ADDR serves GET /metrics over plain
// HTTP to a caller without any credential (a Prometheus server), and
// nothing else: not REST, not /healthz, not another method; the main
// listener's /metrics still asks for a client certificate. It stops with
// the server.
func TestMetricsListener(t *testing.T) {
	t.Parallel()
	tlsMat := servertest.TLS(t)
	cfg := server.Config{HTTPAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", ShutdownGrace: time.Second,
		HTTPReadTimeout: 5 * time.Second, HTTPWriteTimeout: 5 * time.Second, HTTPIdleTimeout: 5 * time.Second}
	rest := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "REST") })
	srv, err := server.New(cfg, zaptest.NewLogger(t), server.Options{TLS: tlsMat, HTTPHandler: rest})
	require.NoError(t, err)
	require.NotEmpty(t, srv.MetricsAddr())
	require.NotEqual(t, srv.HTTPAddr(), srv.MetricsAddr())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cancel()
			require.NoError(t, <-done)
		}
	})

	plain := &http.Client{Timeout: 10 * time.Second}
	do := func(method, path string) (int, string) {
		req, err := http.NewRequest(method, "http://"+srv.MetricsAddr()+path, nil)
		require.NoError(t, err)
		resp, err := plain.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := do("GET", "/metrics")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "\ngo_goroutines ", "the process's registry, in Prometheus' text format")
	for _, c := range []struct{ method, path string }{
		{"GET", "/v2/projects"}, {"GET", "/healthz"}, {"GET", "/"}, {"GET", "/metrics/x"}, {"GET", "/debug/pprof/"},
	} {
		code, body := do(c.method, c.path)
		require.Equal(t, http.StatusNotFound, code, "%s %s: %s", c.method, c.path, body)
		require.NotContains(t, body, "REST")
	}
	code, _ = do("POST", "/metrics")
	require.Equal(t, http.StatusMethodNotAllowed, code)

	// The main listener: HTTPS, /metrics authenticated as before.
	resp, err := httpsClient(tlsMat, nil).Get("https://" + srv.HTTPAddr() + "/metrics")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	// Stopped with the rest: the port no longer answers.
	cancel()
	stopped = true
	require.NoError(t, <-done)
	_, err = plain.Get("http://" + srv.MetricsAddr() + "/metrics")
	require.Error(t, err, "the metrics listener is closed on shutdown")
}

// TestMetricsListenerPortTaken: a port already in use stops New with an
// error naming the setting, and the other listeners it opened are closed.
func TestMetricsListenerPortTaken(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = held.Close() }()
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	httpAddr := httpLn.Addr().String()
	require.NoError(t, httpLn.Close())

	cfg := server.Config{HTTPAddr: httpAddr, InsecureHTTP: true, MetricsAddr: held.Addr().String(), ShutdownGrace: time.Second}
	_, err = server.New(cfg, zaptest.NewLogger(t), server.Options{})
	require.Error(t, err)
	require.True(t, strings.HasPrefix(err.Error(), "DCM_METRICS_ADDR: "), err.Error())
	require.Contains(t, err.Error(), held.Addr().String())

	again, err := net.Listen("tcp", httpAddr)
	require.NoError(t, err, "the HTTP listener New opened is closed again")
	require.NoError(t, again.Close())
}
