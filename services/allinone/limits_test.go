package allinone_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// spaces is an endless body of JSON whitespace, made as it is read.
type spaces struct{ left int64 }

func (s *spaces) Read(p []byte) (int, error) {
	if s.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), s.left)
	for i := range p[:n] {
		p[i] = ' '
	}
	s.left -= n
	return int(n), nil
}

func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestBodyCap: a 400 MB body is refused with 413 and the project's error
// body, declared or streamed (chunked), and the program's heap stays
// bounded while it refuses; a body just under the cap is served.
func TestBodyCap(t *testing.T) {
	s := stacktest.Start(t)
	base := s.URL + "/v2/projects"
	const limit = 4 << 20
	const huge = 400 << 20
	want := fmt.Sprintf(`{"code":413,"status":"ResourceExhausted","message":"request body exceeds %d bytes (DCM_MAX_BODY_BYTES)"}`, limit)

	before := heapAlloc()
	for _, declared := range []bool{true, false} {
		t.Run(fmt.Sprintf("declared=%v", declared), func(t *testing.T) {
			body := io.MultiReader(strings.NewReader(`{"metadata":{"name":"big"}}`), &spaces{left: huge})
			req, err := http.NewRequest("POST", base, io.NopCloser(body))
			require.NoError(t, err)
			req.ContentLength = -1 // chunked
			if declared {
				req.ContentLength = huge + int64(len(`{"metadata":{"name":"big"}}`))
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := s.Admin.Do(req)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", b)
			require.JSONEq(t, want, string(b))
		})
	}
	after := heapAlloc()
	require.Less(t, int64(after)-int64(before), int64(64<<20), "heap grew from %d to %d bytes", before, after)

	code, _ := apitest.Call(t, s.Admin, "GET", base+"/big", "")
	require.Equal(t, 404, code, "the refused project was not made")

	// Just under the cap: the same object padded with whitespace is served.
	obj := `{"metadata":{"name":"padded"}}`
	padded := obj + strings.Repeat(" ", limit-len(obj)-1)
	code, b := apitest.Call(t, s.Admin, "POST", base, padded)
	require.Equal(t, 201, code, "%.200s", b)
}

// TestSlowClientDisconnected: a client that sends half a request and
// stalls is disconnected within the read timeout, and an idle keep-alive
// connection within the idle timeout.
func TestSlowClientDisconnected(t *testing.T) {
	s := stacktest.StartWith(t, stacktest.Options{Args: []string{"-http-read-timeout", "300ms", "-http-idle-timeout", "300ms"}})
	addr := strings.TrimPrefix(s.URL, "https://")
	tlsCfg := s.Client(nil).Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsCfg.ServerName, _, _ = net.SplitHostPort(addr)

	dial := func(t *testing.T) net.Conn {
		t.Helper()
		d := &net.Dialer{Timeout: 5 * time.Second}
		c, err := d.DialContext(context.Background(), "tcp", addr)
		require.NoError(t, err)
		tc := tls.Client(c, tlsCfg)
		require.NoError(t, tc.Handshake())
		t.Cleanup(func() { _ = tc.Close() })
		return tc
	}
	closedWithin := func(t *testing.T, c net.Conn, bound time.Duration) {
		t.Helper()
		// The deadline only stops the test if the server never closes.
		require.NoError(t, c.SetReadDeadline(time.Now().Add(bound)))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if err != nil && errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the server kept the connection open past %s", bound)
		}
	}

	t.Run("half a request", func(t *testing.T) {
		c := dial(t)
		_, err := c.Write([]byte("POST /v2/projects HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"meta"))
		require.NoError(t, err)
		closedWithin(t, c, 5*time.Second)
	})
	t.Run("half the headers", func(t *testing.T) {
		c := dial(t)
		_, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n"))
		require.NoError(t, err)
		closedWithin(t, c, 5*time.Second)
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial(t)
		_, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
		require.NoError(t, err)
		buf := make([]byte, 4096)
		n, err := c.Read(buf)
		require.NoError(t, err)
		require.True(t, bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 200")), "%s", buf[:n])
		closedWithin(t, c, 5*time.Second)
	})
}

// TestUnauthenticatedBodyNotRead: a client without a credential gets its
// 401 while its body is still being sent: the program authenticates before
// it reads a body. (Before, the HTTP server read a chunked body up to
// DCM_MAX_BODY_BYTES before anyone was authenticated: no answer came to a
// body that never ends.)
func TestUnauthenticatedBodyNotRead(t *testing.T) {
	s := stacktest.Start(t)
	// The deadline only ends the test if no answer ever comes.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := &servertest.EndlessBody{First: []byte(`{"metadata":{"name":"p"},`), Stop: ctx.Done()}
	req, err := http.NewRequestWithContext(ctx, "POST", s.URL+"/v2/projects", io.NopCloser(body))
	require.NoError(t, err)
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.Client(nil).Do(req)
	require.NoError(t, err, "no answer while the body was still being sent")
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "%s", b)
}

// TestBodyFloodMemory measures (it does not judge) the program's memory
// while conns clients without a credential each send a large chunked body:
// set DCM_MEASURE_BODY_FLOOD=1 to run it. It logs the process's peak RSS
// (VmHWM; the test and the program share the process, the clients' part is
// small: one shared 64 KiB buffer) before and during the flood, and the
// answers the clients got.
func TestBodyFloodMemory(t *testing.T) {
	if os.Getenv("DCM_MEASURE_BODY_FLOOD") == "" {
		t.Skip("a measurement: DCM_MEASURE_BODY_FLOOD=1 runs it")
	}
	const conns, perConn = 150, 8 << 20
	s := stacktest.StartWith(t, stacktest.Options{Args: []string{"-auth-failure-burst", "1000"}})
	addr := strings.TrimPrefix(s.URL, "https://")
	tlsCfg := s.Client(nil).Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsCfg.ServerName, _, _ = net.SplitHostPort(addr)
	tlsCfg.NextProtos = []string{"http/1.1"}

	runtime.GC()
	debug.FreeOSMemory()
	require.NoError(t, os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)) // resets VmHWM
	idle := procStatus(t, "VmHWM")

	chunk := []byte(fmt.Sprintf("%x\r\n%s\r\n", 64<<10, strings.Repeat(" ", 64<<10)))
	var mu sync.Mutex
	answers := map[string]int{}
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, tlsCfg)
			if err != nil {
				mu.Lock()
				answers["dial: "+err.Error()]++
				mu.Unlock()
				return
			}
			defer func() { _ = c.Close() }()
			_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
			_, err = c.Write([]byte("POST /v2/projects HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"))
			for sent := 0; err == nil && sent < perConn; sent += 64 << 10 {
				_, err = c.Write(chunk)
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			mu.Lock()
			answers[strings.TrimSpace(line)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	peak := procStatus(t, "VmHWM")
	t.Logf("%d connections, up to %d MiB each, no credential: peak RSS %d MiB before, %d MiB during; answers %v",
		conns, perConn>>20, idle>>10, peak>>10, answers)
}

// procStatus is a /proc/self/status field in KiB.
func procStatus(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for l := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
