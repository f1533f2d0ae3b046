package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

type routeKey struct{}

// routeHolder is filled in by the handler once the router matched.
type routeHolder struct{ route string }

// HTTPHandler wraps the REST entry point: each request starts a server
// span (a child of the caller's, when it sent a traceparent header), which
// the request's context carries to the gRPC calls made for it. The span is
// named "METHOD route" once the handler told the route (SetRoute), else
// "METHOD".
func HTTPHandler(next http.Handler) http.Handler {
	h := otelhttp.NewHandler(next, "rest",
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if rh, ok := r.Context().Value(routeKey{}).(*routeHolder); ok && rh.route != "" {
				return r.Method + " " + rh.route
			}
			return r.Method
		}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), routeKey{}, &routeHolder{})))
	})
}

// SetRoute names the REST span of ctx's request "method route" (route is
// the matched path template, "/v2/projects/{project}") and records the
// route as http.route.
func SetRoute(ctx context.Context, method, route string) {
	if route == "" {
		return
	}
	if rh, ok := ctx.Value(routeKey{}).(*routeHolder); ok {
		rh.route = route
	}
	span := trace.SpanFromContext(ctx)
	span.SetName(method + " " + route)
	span.SetAttributes(attribute.String("http.route", route))
}
