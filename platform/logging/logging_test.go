package logging

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
)

// TestFormats: json writes one object per line; console the same entry as
// text for people; anything else is refused, naming the setting.
func TestFormats(t *testing.T) {
	t.Parallel()
	var js, con strings.Builder
	l, err := NewFormatted("svc", "info", "json", &js)
	require.NoError(t, err)
	l.Info("applied", zap.String("cluster", "edge/c1"))
	var line map[string]any
	require.NoError(t, json.Unmarshal([]byte(js.String()), &line))
	require.Equal(t, "applied", line["msg"])
	require.Equal(t, "edge/c1", line["cluster"])

	l, err = NewFormatted("svc", "info", "console", &con)
	require.NoError(t, err)
	l.Info("applied", zap.String("cluster", "edge/c1"))
	out := con.String()
	require.Contains(t, out, "INFO")
	require.Contains(t, out, "svc")
	require.Contains(t, out, "applied")
	require.Contains(t, out, `"cluster": "edge/c1"`)
	require.Error(t, json.Unmarshal([]byte(out), &line), "not JSON")

	_, err = NewFormatted("svc", "info", "yaml", &con)
	require.ErrorContains(t, err, "DCM_LOG_FORMAT")
}

// TestFromOr: the request's logger when ctx carries one, the fallback
// (never a no-op) otherwise.
func TestFromOr(t *testing.T) {
	t.Parallel()
	var req, bg strings.Builder
	reqLog, err := NewFormatted("svc", "info", "json", &req)
	require.NoError(t, err)
	bgLog, err := NewFormatted("svc", "info", "json", &bg)
	require.NoError(t, err)
	FromOr(With(context.Background(), reqLog), bgLog).Warn("in a request")
	FromOr(context.Background(), bgLog).Warn("in a loop")
	require.Contains(t, req.String(), "in a request")
	require.NotContains(t, bg.String(), "in a request")
	require.Contains(t, bg.String(), "in a loop")
}

// TestLevels: a level lets through its own lines and those above it,
// debug included when asked for; an audit logger's info lines are
// written whatever the level.
func TestLevels(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		level string
		want  []string
	}{
		{"debug", []string{"d", "i", "w", "e", "a"}},
		{"info", []string{"i", "w", "e", "a"}},
		{"warn", []string{"w", "e", "a"}},
		{"error", []string{"e", "a"}},
	} {
		t.Run(tc.level, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			l, err := NewFormatted("svc", tc.level, "json", &b)
			require.NoError(t, err)
			l.Debug("d")
			l.Info("i")
			l.Warn("w")
			l.Error("e")
			l.Named(AuditName).Info("a")
			var got []string
			for _, s := range strings.Split(strings.TrimSpace(b.String()), "\n") {
				var line map[string]any
				require.NoError(t, json.Unmarshal([]byte(s), &line))
				got = append(got, line["msg"].(string))
			}
			require.Equal(t, tc.want, got)
		})
	}
}
