package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dcm-project/dcm/platform/pki"
)

// TestClientTraceAfterAuthentication: a client's traceparent sets the
// trace id of its call (the audit line's trace_id, and the spans') only
// once the client is authenticated; a client without a valid credential
// gets the gateway's own trace, whatever it sent. (Before, the REST span
// started before authentication, so a client without a credential chose
// the trace_id of its 401's audit line.)
func TestClientTraceAfterAuthentication(t *testing.T) {
	// What every program sets (platform/telemetry.Setup): W3C trace context.
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	const (
		chosen      = "4bf92f3577b34da6a3ce929d0e0e4736"
		traceparent = "00-" + chosen + "-00f067aa0ba902b7-01"
	)
	core, logs := observer.New(zap.InfoLevel)
	h := testGateway(t, zap.New(core))
	call := func(token string) (int, map[string]any) {
		logs.TakeAll()
		req := httptest.NewRequest("POST", "/v2/projects/a/logical-clouds", nil)
		req.Header.Set("traceparent", traceparent)
		req.Header.Set("baggage", "tenant=b")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		lines := logs.FilterMessage("rest call").All()
		require.Len(t, lines, 1)
		return w.Code, lines[0].ContextMap()
	}
	for _, token := range []string{"", pki.AdminTokenPrefix + "wrong", "unknown"} {
		code, line := call(token)
		require.Equal(t, http.StatusUnauthorized, code)
		require.NotEqual(t, chosen, line["trace_id"], "an unauthenticated client chose the audit line's trace id (token %q)", token)
	}
	// Authenticated: the caller's trace goes on (the services cannot be
	// reached here: 503, audited as an error).
	for _, token := range []string{pki.AdminTokenPrefix + "x", "pa-a"} {
		code, line := call(token)
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Equal(t, chosen, line["trace_id"], "an authenticated caller's traceparent is honoured (token %q)", token)
	}
}
