package logging

import (
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
