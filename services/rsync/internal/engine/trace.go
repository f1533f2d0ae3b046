package engine

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/telemetry"
)

var (
	passSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name: "dcm_rsync_cluster_pass_seconds",
		Help: "Passes over one rollout on one cluster, by cluster (provider/cluster), operation (apply, delete) and result " +
			"(converged, failed: settled with a failed resource, retry: waits for a retry, stopped: stopped or superseded).",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	}, []string{"cluster", "operation", "result"})
	convergeSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dcm_rsync_convergence_seconds",
		Help:    "Time from a rollout change accepted by this replica to its cluster settling at that generation, by cluster (provider/cluster).",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
	}, []string{"cluster"})
)

// passTrace is the change that made an owner's current generation, as
// this replica received it: the passes at that generation are children of
// the request's span, so one trace runs from the REST call to each
// cluster. A replica that loaded the rollout from the store (after a
// restart, or another replica's change) has none: its passes join the
// span stored with the generation (StoredRollout.trace_parent) instead.
type passTrace struct {
	sc  trace.SpanContext
	gen int64
	at  time.Time
	// settled are the clusters whose convergence at gen was measured.
	settled map[string]bool
}

// newPassTrace is the passTrace of a change to generation gen made by ctx's request.
func newPassTrace(ctx context.Context, gen int64) passTrace {
	return passTrace{sc: trace.SpanContextFromContext(ctx), gen: gen, at: time.Now(), settled: map[string]bool{}}
}

// ownerAttributes names the owner on a span: a logical cloud's rollout
// ("lc/<project>/<logical cloud>") by its project and logical cloud too.
func ownerAttributes(owner string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("dcm.owner", owner)}
	if rest, ok := strings.CutPrefix(owner, "lc/"); ok {
		if project, lc, ok := strings.Cut(rest, "/"); ok {
			attrs = append(attrs, attribute.String("dcm.project", project), attribute.String("dcm.logical_cloud", lc))
		}
	}
	return attrs
}

// tracePass starts the span of a pass of t at generation gen and returns
// what ends it (and counts the pass). Called with mu held; the end takes mu.
func (w *statusWriter) tracePass(ctx context.Context, t *task, gen int64) (context.Context, func()) {
	o := t.owner
	op := "apply"
	if o.rec.GetDeleting() {
		op = "delete"
	}
	ck := t.provider + "/" + t.cluster
	attrs := append(ownerAttributes(o.rec.GetOwner()),
		attribute.String("dcm.cluster_provider", t.provider), attribute.String("dcm.cluster", t.cluster),
		attribute.String("dcm.operation", op), attribute.Int64("dcm.generation", gen))
	opts := []trace.SpanStartOption{trace.WithAttributes(attrs...)}
	if sc := spanContextOf(o, gen); sc.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, sc)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := telemetry.Tracer().Start(ctx, "rsync "+op, opts...)
	start := time.Now()
	return ctx, func() {
		w.tasks.Lock()
		result, last := passResult(t, gen)
		measure := result == "converged" && o.trace.gen == gen && !o.trace.at.IsZero() && !o.trace.settled[ck]
		if measure {
			o.trace.settled[ck] = true
		}
		since := time.Since(o.trace.at)
		w.tasks.Unlock()
		if measure {
			convergeSeconds.WithLabelValues(ck).Observe(since.Seconds())
		}
		passSeconds.WithLabelValues(ck, op, result).Observe(time.Since(start).Seconds())
		span.SetAttributes(attribute.String("dcm.result", result))
		if last != "" {
			span.SetStatus(otelcodes.Error, last)
		}
		span.End()
	}
}

// passResult is how a pass of t at gen ended, and the last error of a
// resource that failed or waits for a retry. Called with mu held.
func passResult(t *task, gen int64) (result, lastError string) {
	retrying, failed := "", ""
	for _, r := range t.state.GetResources() {
		switch r.GetState() {
		case rsyncv1.State_STATE_RETRYING:
			retrying = r.GetLastError()
		case rsyncv1.State_STATE_FAILED:
			failed = r.GetLastError()
		}
	}
	switch {
	case t.state.GetGeneration() == gen && t.owner.rec.GetGeneration() == gen && failed != "":
		return "failed", failed
	case t.state.GetGeneration() == gen && t.owner.rec.GetGeneration() == gen:
		return "converged", ""
	case retrying != "":
		return "retry", retrying
	default:
		return "stopped", ""
	}
}

// traceField is the trace_id of a log line about t's pass, when the
// change it works on was traced. Called with mu held.
func traceField(t *task) zap.Field {
	if sc := spanContextOf(t.owner, t.owner.rec.GetGeneration()); sc.HasTraceID() {
		return zap.String("trace_id", sc.TraceID().String())
	}
	return zap.Skip()
}

// spanContextOf is the span the passes of o at generation gen join: the
// change's as this replica received it, else the one stored with the
// generation. Called with mu held.
func spanContextOf(o *owner, gen int64) trace.SpanContext {
	if tr := o.trace; tr.gen == gen && tr.sc.IsValid() {
		return tr.sc
	}
	if o.rec.GetGeneration() != gen || o.rec.GetTraceParent() == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": o.rec.GetTraceParent()})
	return trace.SpanContextFromContext(ctx)
}

// traceParent is the W3C traceparent of ctx's span ("" when untraced).
func traceParent(ctx context.Context) string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier["traceparent"]
}
