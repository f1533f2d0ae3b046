package telemetry

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	collectortracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// receiver keeps the spans an OTLP exporter sends it, over HTTP or gRPC.
type receiver struct {
	collectortracev1.UnimplementedTraceServiceServer
	mu      sync.Mutex
	spans   []*tracev1.Span
	service []string
}

func (rc *receiver) Export(_ context.Context, req *collectortracev1.ExportTraceServiceRequest) (*collectortracev1.ExportTraceServiceResponse, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		svc := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				svc = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				rc.spans = append(rc.spans, s)
				rc.service = append(rc.service, svc)
			}
		}
	}
	return &collectortracev1.ExportTraceServiceResponse{}, nil
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	var req collectortracev1.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	if err != nil || r.URL.Path != "/v1/traces" {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	resp, _ := rc.Export(r.Context(), &req)
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func httpReceiver(t *testing.T) (*receiver, string) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return rc, srv.URL
}

func grpcReceiver(t *testing.T) (*receiver, string) {
	rc := &receiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := grpc.NewServer()
	collectortracev1.RegisterTraceServiceServer(s, rc)
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return rc, "http://" + ln.Addr().String()
}

func clearEnv(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, "")
	}
}

// TestSetupExports: with an endpoint set, the spans started reach the
// collector, named for the program, once shutdown flushed them (the batch
// delay is longer than the test), over either protocol and either variable.
func TestSetupExports(t *testing.T) {
	for _, c := range []struct {
		name, protocol, endpointVar string
		receiver                    func(*testing.T) (*receiver, string)
	}{
		{"http", "", "OTEL_EXPORTER_OTLP_ENDPOINT", httpReceiver},
		{"http traces endpoint", "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", httpReceiver},
		{"grpc", "grpc", "OTEL_EXPORTER_OTLP_ENDPOINT", grpcReceiver},
	} {
		t.Run(c.name, func(t *testing.T) {
			clearEnv(t)
			rc, url := c.receiver(t)
			if c.endpointVar == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" && c.protocol != "grpc" {
				url += "/v1/traces"
			}
			t.Setenv(c.endpointVar, url)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", c.protocol)
			before := otel.GetTracerProvider()
			shutdown, err := Setup(context.Background(), "dcm-test")
			require.NoError(t, err)
			require.NotEqual(t, before, otel.GetTracerProvider(), "an SDK provider is installed")
			_, span := Tracer().Start(context.Background(), "work")
			span.End()
			require.NoError(t, shutdown(context.Background()))
			require.Equal(t, before, otel.GetTracerProvider(), "shutdown puts the previous provider back")
			rc.mu.Lock()
			defer rc.mu.Unlock()
			require.Len(t, rc.spans, 1)
			require.Equal(t, "work", rc.spans[0].GetName())
			require.Equal(t, "dcm-test", rc.service[0])
		})
	}
}

// TestSetupWithoutEndpoint: nothing is installed but the propagator, which
// carries a caller's trace context on.
func TestSetupWithoutEndpoint(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"},
	} {
		clearEnv(t)
		for k, v := range env {
			t.Setenv(k, v)
		}
		before := otel.GetTracerProvider()
		shutdown, err := Setup(context.Background(), "dcm-test")
		require.NoError(t, err)
		require.Equal(t, before, otel.GetTracerProvider(), "%v: no provider installed", env)
		require.NoError(t, shutdown(context.Background()))
	}
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", TraceID(ctx))
	require.Empty(t, TraceID(context.Background()))
}

func TestSetupRefusesUnknownProtocol(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	_, err := Setup(context.Background(), "dcm-test")
	require.ErrorContains(t, err, "http/json")
}

// TestHTTPHandler: a REST call is a server span named after its route,
// the child of the caller's span when it sent traceparent.
func TestHTTPHandler(t *testing.T) {
	clearEnv(t)
	rc, url := httpReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	shutdown, err := Setup(context.Background(), "dcm-test")
	require.NoError(t, err)
	var seen []string
	h := HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, TraceID(r.Context()))
		SetRoute(r.Context(), r.Method, "/v2/things/{thing}")
		w.WriteHeader(http.StatusTeapot)
	}))
	req := httptest.NewRequest("GET", "/v2/things/a", nil)
	req.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	h.ServeHTTP(httptest.NewRecorder(), req)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v2/things/b", nil))
	require.NoError(t, shutdown(context.Background()))
	require.Equal(t, "0af7651916cd43dd8448eb211c80319c", seen[0], "the handler's context carries the trace")
	require.Len(t, seen, 2)
	require.NotEmpty(t, seen[1], "a call without traceparent is traced too")
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.Len(t, rc.spans, 2)
	for _, s := range rc.spans {
		require.Equal(t, "GET /v2/things/{thing}", s.GetName())
		require.Equal(t, tracev1.Span_SPAN_KIND_SERVER, s.GetKind())
	}
	require.Equal(t, "b7ad6b7169203331", hex.EncodeToString(rc.spans[0].GetParentSpanId()), "the caller's span is the parent")
	require.Empty(t, rc.spans[1].GetParentSpanId(), "without traceparent the REST call starts the trace")
}
