package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// passSpans are the ended pass spans of owner the recorder holds.
func passSpans(rec *tracetest.SpanRecorder, owner string) []sdktrace.ReadOnlySpan {
	return slices.DeleteFunc(rec.Ended(), func(s sdktrace.ReadOnlySpan) bool {
		return s.Name() != "rsync apply" || !slices.Contains(s.Attributes(), attribute.String("dcm.owner", owner))
	})
}

// TestTraceSurvivesARestart: the passes of a rollout are children of the
// span of the request that submitted it, on the engine that received it
// and, after that engine stopped, on another engine that loaded the
// rollout from the store (a restart, or a replica taking the cluster
// over): the request's span context is stored with the generation.
func TestTraceSurvivesARestart(t *testing.T) {
	// The process's tracer provider: not parallel with the other tests
	// that set it (none); spans are told apart by owner.
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	was := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(was) })

	st := storetest.Open(t)
	down := &gated{Simulated: &engine.Simulated{}}
	down.set(errors.New("dial tcp: connection refused")) // retried: passes go on
	conn := engine.Clusters[*gated]{"sim/c0": down}
	cfg := testConfig
	cfg.RetryBase, cfg.RetryMax = 5*time.Millisecond, 20*time.Millisecond
	run := func() (*engine.Engine, func()) {
		e := engine.New(st, conn, cfg, zap.NewNop())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		return e, func() { cancel(); require.NoError(t, <-done) }
	}
	const owner = "lc/p/traced"
	waitSpans := func(from int) []sdktrace.ReadOnlySpan {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			if spans := passSpans(rec, owner); len(spans) > from {
				return spans[from:]
			}
			require.True(t, time.Now().Before(deadline), "no pass span of %s", owner)
			time.Sleep(10 * time.Millisecond)
		}
	}
	isChild := func(spans []sdktrace.ReadOnlySpan, of trace.SpanContext) {
		t.Helper()
		for _, s := range spans {
			require.Equal(t, of.TraceID(), s.SpanContext().TraceID(), "the request's trace")
			require.Equal(t, of.SpanID(), s.Parent().SpanID(), "a child of the request's span")
		}
	}

	e, stop := run()
	reqCtx, request := tp.Tracer("test").Start(context.Background(), "POST .../apply")
	_, err := e.Submit(reqCtx, owner, simRollout(engine.SimulatedClusters{"sim/c0": nil}, configMaps("traced", 1)))
	require.NoError(t, err)
	request.End()
	want := request.SpanContext()
	isChild(waitSpans(0), want) // the engine that received the request
	stop()

	// Another engine on the store, which never saw the request.
	before := len(passSpans(rec, owner))
	_, stop = run()
	defer stop()
	isChild(waitSpans(before), want)
}
