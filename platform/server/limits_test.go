package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/dcm-project/dcm/platform/server"
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
// the error format, declared or chunked, before the handler sees them;
// bodies up to it reach the handler whole. (The whole program's test,
// with the memory bound, is services/allinone TestBodyCap.)
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	const limit = 1000
	cfg := server.Config{HTTPAddr: "127.0.0.1:0", InsecureHTTP: true, ShutdownGrace: time.Second, MaxBodyBytes: limit}
	srv, err := server.New(cfg, zaptest.NewLogger(t), server.Options{HTTPHandler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
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
