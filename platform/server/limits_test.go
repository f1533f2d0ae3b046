package server_test

import (
	"bufio"
	"context"
	"fmt"
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

// zeros is a body of n bytes made as it is read.
type zeros struct{ left int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), z.left)
	clear(p[:n])
	z.left -= n
	return int(n), nil
}

// TestBodyLimit: bodies above DCM_MAX_BODY_BYTES are refused with 413 in
// the error format: declared, before the handler runs; chunked, when the
// handler reads past the limit (server.TooLarge); bodies up to it reach
// the handler whole. (The whole program's test,
// with the memory bound, is services/allinone TestBodyCap.)
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	const limit = 1000
	cfg := server.Config{HTTPAddr: "127.0.0.1:0", InsecureHTTP: true, ShutdownGrace: time.Second, MaxBodyBytes: limit}
	srv, err := server.New(cfg, zaptest.NewLogger(t), server.Options{HTTPHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if server.TooLarge(w, err) {
			return
		}
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		_, _ = fmt.Fprintf(w, "read %d", len(b))
	})})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	tooLarge := fmt.Sprintf(`{"code":413,"status":"ResourceExhausted","message":"request body exceeds %d bytes (DCM_MAX_BODY_BYTES)"}`, limit)
	for _, tc := range []struct {
		name     string
		size     int64
		declared bool
		code     int
		body     string
	}{
		{"declared, at the limit", limit, true, 200, fmt.Sprintf("read %d", limit)},
		{"chunked, at the limit", limit, false, 200, fmt.Sprintf("read %d", limit)},
		{"declared, one byte over", limit + 1, true, 413, tooLarge},
		{"chunked, one byte over", limit + 1, false, 413, tooLarge},
		{"chunked, 100 MB", 100 << 20, false, 413, tooLarge},
		{"empty", 0, true, 200, "read 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", "http://"+srv.HTTPAddr()+"/x", io.NopCloser(&zeros{left: tc.size}))
			require.NoError(t, err)
			req.ContentLength = -1
			if tc.declared {
				req.ContentLength = tc.size
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.code, resp.StatusCode, "%s", b)
			if strings.HasPrefix(tc.body, "{") {
				require.JSONEq(t, tc.body, string(b))
			} else {
				require.Equal(t, tc.body, string(b))
			}
		})
	}
}

// sendChunked writes a POST with body as its chunked body; write errors
// end it (the server may close the connection once it has answered).
func sendChunked(w io.Writer, body io.Reader) {
	if _, err := io.WriteString(w, "POST /x HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := fmt.Fprintf(w, "%x\r\n%s\r\n", n, buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_, _ = io.WriteString(w, "0\r\n\r\n")
			return
		}
	}
}

// TestBodyNotReadBeforeHandler: the server reads no body before its
// handler does. A handler that refuses the request without reading it (as
// the gateway refuses a client without a credential) answers a chunked
// body far above the cap with its own answer, not 413, and a body that
// never ends gets that answer too: nothing waits for the body. (Before,
// the server read a chunked body up to the cap first: 413 for the first,
// no answer at all for the second.)
func TestBodyNotReadBeforeHandler(t *testing.T) {
	t.Parallel()
	const limit = 1000
	cfg := server.Config{HTTPAddr: "127.0.0.1:0", InsecureHTTP: true, ShutdownGrace: time.Second, MaxBodyBytes: limit}
	srv, err := server.New(cfg, zaptest.NewLogger(t), server.Options{HTTPHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "authentication required", http.StatusUnauthorized)
	})})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	for name, body := range map[string]func(stop <-chan struct{}) io.Reader{
		"chunked, 100 MB": func(<-chan struct{}) io.Reader { return &zeros{left: 100 << 20} },
		"chunked, never ends": func(stop <-chan struct{}) io.Reader {
			return &servertest.EndlessBody{First: []byte(`{"metadata":`), Stop: stop}
		},
	} {
		t.Run(name, func(t *testing.T) {
			// A raw connection, so that the answer is read while the body
			// is still being written: Go's client gives up on a request
			// whose body write fails (the server closes the connection
			// after its answer) even when the answer has arrived.
			stop := make(chan struct{})
			defer close(stop)
			conn, err := net.Dial("tcp", srv.HTTPAddr())
			require.NoError(t, err)
			defer func() { _ = conn.Close() }()
			// The deadline only ends the test if no answer ever comes.
			require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
			go sendChunked(conn, body(stop))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err, "no answer while the body was still being sent")
			defer func() { _ = resp.Body.Close() }()
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			require.True(t, resp.Close, "the connection is closed, not drained")
		})
	}
}
