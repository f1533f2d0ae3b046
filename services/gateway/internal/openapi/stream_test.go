package openapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStreamingErrors: a streaming operation (the status watch) lists its
// errors with the Error body like every other operation (the gateway
// answers errors before the stream began so), and its 200 line schema has
// the error line that may end a stream after it began.
func TestStreamingErrors(t *testing.T) {
	t.Parallel()
	raw, err := Build(func(string) int { return http.StatusOK }, "test")
	require.NoError(t, err)
	var doc struct {
		Paths       map[string]map[string]map[string]any `json:"paths"`
		Definitions map[string]any                       `json:"definitions"`
		Responses   map[string]any                       `json:"responses"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.NotContains(t, doc.Definitions, "StreamError")
	require.Contains(t, doc.Definitions, ErrorDefinition)
	for name := range doc.Responses {
		require.NotContains(t, name, "stream", "no stream-only error response")
	}
	streams := 0
	for path, ops := range doc.Paths {
		for verb, op := range ops {
			resps, _ := op["responses"].(map[string]any)
			ok, _ := resps["200"].(map[string]any)
			schema, _ := ok["schema"].(map[string]any)
			title, _ := schema["title"].(string)
			if !strings.HasPrefix(title, "Stream result of") {
				continue
			}
			streams++
			props, _ := schema["properties"].(map[string]any)
			require.Contains(t, props, "result", "%s %s", verb, path)
			line, _ := props["error"].(map[string]any)
			require.NotNil(t, line, "%s %s: the stream's error line", verb, path)
			lineProps, _ := line["properties"].(map[string]any)
			require.Contains(t, lineProps, "code")
			require.Contains(t, lineProps, "message")
			for _, c := range []string{"400", "401", "403", "404", "429", "503"} {
				require.Equal(t, map[string]any{"$ref": "#/responses/" + c}, resps[c], "%s %s %s", verb, path, c)
			}
			require.Contains(t, op["description"], "Once the 200 stream began")
		}
	}
	require.Equal(t, 1, streams, "the status watch is the one streaming operation")
}
