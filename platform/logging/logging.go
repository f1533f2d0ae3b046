// Package logging builds the zap JSON loggers every service uses and carries a
// request-scoped logger in a context. It must not log secrets: callers pass
// values through config.Dump or leave them out.
package logging

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a JSON logger to stderr at level ("debug", "info", "warn",
// "error") named for the service.
func New(service, level string) (*zap.Logger, error) {
	return NewTo(service, level, os.Stderr)
}

// NewTo is New writing to w.
func NewTo(service, level string, w io.Writer) (*zap.Logger, error) {
	return NewFormatted(service, level, "json", w)
}

// NewFormatted is NewTo in format "json" (the default) or "console"
// (aligned text for people; the same fields). It is how a program builds
// its logger, so it also routes klog (client-go's logs) through the logger
// it returns (RouteKlog): no plain text beside the program's lines.
func NewFormatted(service, level, format string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "time"
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	switch format {
	case "", "json":
		encoder = zapcore.NewJSONEncoder(enc)
	case "console":
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		encoder = zapcore.NewConsoleEncoder(enc)
	default:
		return nil, fmt.Errorf("log format %q: json or console (DCM_LOG_FORMAT)", format)
	}
	// No stack traces: the recovery interceptor logs a panic's stack itself.
	// The inner core lets debug through when asked for it; auditCore decides.
	core := zapcore.NewCore(encoder, zapcore.Lock(zapcore.AddSync(w)), min(lvl, zapcore.InfoLevel))
	log := zap.New(auditCore{core, lvl}, zap.AddCaller()).Named(service)
	RouteKlog(log)
	return log, nil
}

// AuditName is the name of the audit logger (under the service's name):
// its lines are written whatever the level, which only quiets the rest.
const AuditName = "audit"

// auditCore writes entries of level or above, and every info entry of an
// audit logger.
type auditCore struct {
	zapcore.Core
	level zapcore.Level
}

func (c auditCore) Enabled(l zapcore.Level) bool {
	return l >= zapcore.InfoLevel || l >= c.level
}

func (c auditCore) With(f []zapcore.Field) zapcore.Core {
	return auditCore{c.Core.With(f), c.level}
}

func (c auditCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Level >= c.level || (e.Level >= zapcore.InfoLevel && strings.HasSuffix(e.LoggerName, "."+AuditName)) {
		return c.Core.Check(e, ce)
	}
	return ce
}

type ctxKey struct{}

// With returns ctx carrying l.
func With(ctx context.Context, l *zap.Logger) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// From returns the request-scoped logger in ctx, or a no-op logger.
func From(ctx context.Context) *zap.Logger {
	if l, ok := ctx.Value(ctxKey{}).(*zap.Logger); ok {
		return l
	}
	return zap.NewNop()
}

// FromOr returns the request-scoped logger in ctx (its lines carry the
// request and trace ids), or fallback outside a request (a background
// loop), so that a warning is never lost to a no-op logger.
func FromOr(ctx context.Context, fallback *zap.Logger) *zap.Logger {
	if l, ok := ctx.Value(ctxKey{}).(*zap.Logger); ok {
		return l
	}
	return fallback
}
