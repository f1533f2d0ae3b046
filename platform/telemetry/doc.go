// Package telemetry sets up OpenTelemetry tracing for a DCM program: the
// W3C trace-context propagator, and an OTLP span exporter when the SDK's
// standard environment variables (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, ...) name a collector. It also wraps
// the REST entry point so that a REST call starts the trace. It must not
// know about any service, and without those variables it exports nothing.
package telemetry
