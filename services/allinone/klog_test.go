package allinone_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientrest "k8s.io/client-go/rest"

	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// TestClientGoLogsAreTheProgramsJSON: once the program has started, what
// client-go and the apimachinery log through klog (an API server's
// warning, an error handed to HandleError) are JSON lines of the
// program's logger, named dcm.klog (and below), and nothing is written to stderr as
// plain text. Not parallel: klog is one per process, and each program
// started takes it over.
func TestClientGoLogsAreTheProgramsJSON(t *testing.T) {
	logs := &syncBuffer{}
	stacktest.StartWith(t, stacktest.Options{Logs: logs, Args: []string{"-log-level", "info"}})

	r, w, err := os.Pipe()
	require.NoError(t, err)
	stderr := os.Stderr
	os.Stderr = w
	restored := false
	restore := func() {
		if !restored {
			restored = true
			os.Stderr = stderr
			_ = w.Close()
		}
	}
	t.Cleanup(restore)
	plain := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		plain <- string(b)
	}()
	// client-go's own handler of an API server's Warning header, and the
	// apimachinery's handler of errors a controller cannot return.
	clientrest.WarningLogger{}.HandleWarningHeader(299, "", "example.dcm.io/v1beta1 Widget is deprecated")
	utilruntime.HandleError(errors.New("watch of widgets ended: connection refused"))
	restore()
	require.Empty(t, <-plain, "plain text on stderr")

	want := map[string]string{
		"example.dcm.io/v1beta1 Widget is deprecated": "info",
		"watch of widgets ended: connection refused":  "error",
	}
	// klog calls the logger synchronously: the lines are there.
	got := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), "not one JSON object: %q", sc.Text())
		if name, _ := line["logger"].(string); name != "dcm.klog" && !strings.HasPrefix(name, "dcm.klog.") {
			continue // klog names some lines (dcm.klog.UnhandledError)
		}
		text, _ := line["msg"].(string)
		if e, ok := line["error"].(string); ok {
			text += " " + e
		}
		for w := range want {
			if strings.Contains(text, w) {
				got[w], _ = line["level"].(string)
			}
		}
	}
	require.Equal(t, want, got, "the klog lines of the program's log, by level")
}
