package gateway

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/dcm-project/dcm/platform/telemetry"
)

// restSeconds is the REST surface's rate, errors and latency per route
// (deploy/grafana/dcm.json): the gRPC metrics see the calls by RPC, not by
// the URL a client used, nor the refusals made before one.
var restSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "dcm_rest_request_seconds",
	Help:    "REST request latency at the gateway, by method, route template (\"none\": refused or unmatched before routing) and status code.",
	Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
}, []string{"method", "route", "code"})

// observeREST records a finished REST call: its latency by route, and its
// route on its trace span. route is the matched template ("" if none).
func observeREST(r *http.Request, route string, code int, start time.Time) {
	telemetry.SetRoute(r.Context(), r.Method, route)
	if route == "" {
		route = "none"
	}
	method := r.Method
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
	default:
		method = "other" // a client's made-up method must not grow the label set
	}
	restSeconds.WithLabelValues(method, route, strconv.Itoa(code)).Observe(time.Since(start).Seconds())
}

// traceField is the trace_id of a log line about ctx's request, or nothing
// when it is not traced.
func traceField(ctx context.Context) zap.Field {
	if id := telemetry.TraceID(ctx); id != "" {
		return zap.String("trace_id", id)
	}
	return zap.Skip()
}
