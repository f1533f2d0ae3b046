package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
)

// TestAuditLineIDs: the audit line of a direct gRPC call carries the
// request id the caller sent (else the one its request lines got) and
// the trace id of the call's span, the same as the request's own lines;
// a refused call's audit line has them too.
func TestAuditLineIDs(t *testing.T) {
	t.Parallel()
	// What every program sets (platform/telemetry.Setup): W3C trace context.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	core, logs := observer.New(zap.DebugLevel)
	e := serveEchoes(t, zap.New(core).Named("dcm"))
	admin, _ := issue(t, e.ca, e.bundle, pki.Identity{Subject: "auditor", Role: pki.RoleAdmin}, time.Now().Add(time.Hour))
	conn, err := client.Dial(e.srv.GRPCAddr(), admin)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	const (
		traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
		traceparent = "00-" + traceID + "-00f067aa0ba902b7-01"
	)
	call := func(service string, kv ...string) codes.Code {
		logs.TakeAll() // the lines of this call only
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if len(kv) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, kv...)
		}
		return status.Code(conn.Invoke(ctx, "/dcm.test.v1."+service+"/Call", &structpb.Struct{}, &emptypb.Empty{}))
	}
	audited := func(msg, method string) map[string]any {
		t.Helper()
		lines := logs.FilterLoggerName("dcm.audit").FilterMessage(msg).FilterField(zap.String("subject", "auditor")).
			FilterField(zap.String("grpc.method", method)).All()
		require.Len(t, lines, 1, "%v", logs.All())
		return lines[0].ContextMap()
	}
	request := func(method string) map[string]any {
		t.Helper()
		lines := logs.FilterLoggerName("dcm").FilterMessage("request").FilterField(zap.String("grpc.method", method)).All()
		require.Len(t, lines, 1, "%v", logs.All())
		return lines[0].ContextMap()
	}
	const public, internal = "/dcm.test.v1.EchoService/Call", "/dcm.test.v1.EchoInternalService/Call"

	// The gateway's request id and a traced caller.
	require.Equal(t, codes.OK, call("EchoService", server.RequestIDHeader, "req-audit-1", "traceparent", traceparent))
	a, r := audited("grpc call", public), request(public)
	require.Equal(t, "req-audit-1", a["request_id"])
	require.Equal(t, traceID, a["trace_id"], "the trace of the call's span")
	require.Equal(t, r["request_id"], a["request_id"])
	require.Equal(t, r["trace_id"], a["trace_id"])

	// No request id sent: the one made for the call, on both lines; no trace, no trace id.
	require.Equal(t, codes.OK, call("EchoService"))
	a, r = audited("grpc call", public), request(public)
	require.NotEmpty(t, a["request_id"])
	require.Equal(t, r["request_id"], a["request_id"])
	require.NotContains(t, a, "trace_id")

	// Refused before the request logger: its line has the ids too.
	require.Equal(t, codes.PermissionDenied, call("EchoInternalService", server.RequestIDHeader, "req-audit-2", "traceparent", traceparent))
	a = audited("grpc call refused", internal)
	require.Equal(t, "req-audit-2", a["request_id"])
	require.Equal(t, traceID, a["trace_id"])
}
