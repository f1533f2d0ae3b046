package logging

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
)

// TestKlogThroughZap: once a program's logger is built, klog's lines
// (client-go's) are JSON lines of that logger, named klog, at the levels
// documented on RouteKlog, with the klog call as their caller; nothing
// is written to stderr. Not parallel: klog is one per process, and the
// other tests of this package build loggers (each takes klog over).
func TestKlogThroughZap(t *testing.T) {
	stderr := captureStderr(t)
	var out strings.Builder
	_, err := NewFormatted("svc", "info", "json", &out)
	require.NoError(t, err)

	klog.Info("watch started")
	klog.InfoS("reflector", "resource", "secrets", "n", 3)
	klog.Warning("a deprecated API")
	klog.ErrorS(errors.New("connection refused"), "list failed", "cluster", "edge/c1")
	klog.Errorf("failed %d times", 2)
	utilruntime.HandleError(errors.New("watch ended")) // through klog's own logr, which names it
	klog.InfoS("keys of the line", "msg", "a value", "level", 3)
	klog.V(1).Info("chatty at 1")
	klog.V(4).Info("chatty at 4")
	klog.Flush()

	lines := jsonLines(t, out.String())
	require.Len(t, lines, 7, "V(1) and above are left out at info: %s", out.String())
	for _, l := range lines[:5] {
		require.Equal(t, "svc."+KlogName, l["logger"])
		require.Contains(t, l["caller"], "logging/klog_test.go", "the caller is the klog call")
	}
	require.Equal(t, "svc.klog.UnhandledError", lines[5]["logger"])
	require.Equal(t, "error", lines[5]["level"])
	require.Equal(t, "watch ended", lines[5]["error"])
	require.Equal(t, "keys of the line", lines[6]["msg"])
	require.Equal(t, "a value", lines[6]["klog.msg"])
	require.EqualValues(t, 3, lines[6]["klog.level"])
	require.Equal(t, "info", lines[6]["level"])
	require.Equal(t, "watch started", lines[0]["msg"])
	require.Equal(t, "info", lines[0]["level"])
	require.Equal(t, "reflector", lines[1]["msg"])
	require.Equal(t, "secrets", lines[1]["resource"])
	require.EqualValues(t, 3, lines[1]["n"])
	require.Equal(t, "a deprecated API", lines[2]["msg"])
	require.Equal(t, "info", lines[2]["level"])
	require.Equal(t, "list failed", lines[3]["msg"])
	require.Equal(t, "error", lines[3]["level"])
	require.Equal(t, "connection refused", lines[3]["error"])
	require.Equal(t, "edge/c1", lines[3]["cluster"])
	require.Equal(t, "failed 2 times", lines[4]["msg"])
	require.Equal(t, "error", lines[4]["level"])

	// At debug, V(1) and V(2) come through as debug; V(3) and above never.
	var dbg strings.Builder
	_, err = NewFormatted("svc", "debug", "json", &dbg)
	require.NoError(t, err)
	klog.V(2).InfoS("chatty at 2", "k", "v")
	klog.V(3).Info("chatty at 3")
	klog.Flush()
	lines = jsonLines(t, dbg.String())
	require.Len(t, lines, 1, dbg.String())
	require.Equal(t, "chatty at 2", lines[0]["msg"])
	require.Equal(t, "debug", lines[0]["level"])
	require.NotContains(t, out.String(), "chatty", "the first logger no longer hears klog")

	// The console format gets klog's lines too, as console lines.
	var con strings.Builder
	_, err = NewFormatted("svc", "info", "console", &con)
	require.NoError(t, err)
	klog.Info("in a terminal")
	require.Contains(t, con.String(), "INFO\tsvc.klog\t")
	require.Contains(t, con.String(), "in a terminal")

	require.Empty(t, stderr(), "klog wrote plain text to stderr")
}

// captureStderr points os.Stderr at a pipe until the returned function
// is called, which answers what was written.
func captureStderr(t *testing.T) func() string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	orig := os.Stderr
	os.Stderr = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	restored := false
	restore := func() string {
		if restored {
			return ""
		}
		restored = true
		os.Stderr = orig
		_ = w.Close()
		return <-done
	}
	t.Cleanup(func() { restore() })
	return restore
}

func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "not one JSON object: %q", sc.Text())
		for _, k := range []string{"logger", "msg", "level"} {
			require.Equal(t, 1, strings.Count(sc.Text(), `"`+k+`":`), "one %s key: %s", k, sc.Text())
		}
		lines = append(lines, m)
	}
	return lines
}

// TestRouteKlogConcurrently routes klog from many goroutines at once, as
// the programs of one test binary do when they start together (run with
// -race, or it crashes with "concurrent map writes" without the lock).
func TestRouteKlogConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := zap.NewNop()
			if i%2 == 0 { // at debug: the verbosity set differs
				l = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.DebugLevel))
			}
			for range 200 {
				RouteKlog(l)
			}
		}()
	}
	wg.Wait()
}
