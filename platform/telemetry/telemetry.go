package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the spans DCM's own code
// starts (otelgrpc and otelhttp name theirs).
const TracerName = "github.com/dcm-project/dcm"

// Tracer is the tracer DCM's own spans come from: the global provider's,
// looked up at each call so a program's provider set up after the caller
// was built is used.
func Tracer() trace.Tracer { return otel.Tracer(TracerName) }

// Enabled says whether the environment asks for spans to be exported:
// an OTLP endpoint is set, and neither OTEL_SDK_DISABLED nor
// OTEL_TRACES_EXPORTER=none turns it off.
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" && !strings.EqualFold(e, "otlp") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// protocol is the OTLP protocol the environment asks for:
// "http/protobuf" (the default) or "grpc".
func protocol() (string, error) {
	p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if p == "" {
		p = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch p {
	case "", "http/protobuf":
		return "http/protobuf", nil
	case "grpc":
		return "grpc", nil
	default:
		return "", fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: DCM exports traces over http/protobuf or grpc", p)
	}
}

// Setup installs the W3C trace-context (and baggage) propagator globally
// and, when Enabled, a tracer provider that batches spans to the OTLP
// endpoint the SDK's standard variables name (OTEL_EXPORTER_OTLP_*,
// OTEL_BSP_*, OTEL_TRACES_SAMPLER, OTEL_RESOURCE_ATTRIBUTES), with
// service.name = service unless OTEL_SERVICE_NAME says otherwise. The
// returned shutdown flushes what is batched and stops exporting; it is a
// no-op when nothing was installed. Spans are only started by the
// instrumentation (otelgrpc, otelhttp, Tracer), never here.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	noop := func(context.Context) error { return nil }
	if !Enabled() {
		return noop, nil
	}
	proto, err := protocol()
	if err != nil {
		return noop, err
	}
	var exp sdktrace.SpanExporter
	if proto == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return noop, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(), // OTEL_RESOURCE_ATTRIBUTES, OTEL_SERVICE_NAME win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return noop, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	return func(ctx context.Context) error {
		// Put the previous provider back unless another Setup replaced
		// ours since (tests start several programs in one process).
		if otel.GetTracerProvider() == trace.TracerProvider(tp) {
			otel.SetTracerProvider(prev)
		}
		return tp.Shutdown(ctx)
	}, nil
}

// TraceID is the trace id of the span in ctx, or "" when ctx is not
// traced: what log lines carry as trace_id.
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}
