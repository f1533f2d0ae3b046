package logging

import (
	"flag"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// KlogName is the name (under the service's name) of the logger that
// client-go's klog lines are written through.
const KlogName = "klog"

// klogMaxV is the highest klog verbosity let through, and only when the
// program logs at debug: client-go's V(3) and above (every request, every
// watch event) would drown the program's own lines.
const klogMaxV = 2

var (
	klogOnce  sync.Once
	klogFlags *flag.FlagSet
	// klogSetMu serializes RouteKlog's writes of klogFlags: FlagSet.Set
	// records the flag as set in a map, and programs of one test binary
	// start at once.
	klogSetMu  sync.Mutex
	klogTarget atomic.Pointer[zap.Logger]
)

// RouteKlog sends every klog line of the process (client-go's, the
// apimachinery's) through l, named "klog", so that a program's stderr
// holds only its zap lines (JSON, or console). klog's own output is
// never written: not to stderr, not to files.
//
// klog is one per process; the last logger routed gets its lines (a
// test binary that starts several programs hears client-go through the
// last one started). Levels: klog.Info and klog.Warning are info (klog
// does not tell a logger which of the two it was), klog.Error is error;
// klog.V(1) and V(2) are debug and written only when l logs at debug
// (DCM_LOG_LEVEL=debug); V(3) and above never are.
func RouteKlog(l *zap.Logger) {
	klogTarget.Store(l.Named(KlogName))
	klogOnce.Do(func() {
		klogFlags = flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(klogFlags)
		// klog's SetLogger is not safe against concurrent log calls: it is
		// set once, and later programs only swap the target, atomically.
		klog.SetLogger(logr.New(&klogSink{}))
	})
	v := "0"
	if l.Core().Enabled(zapcore.DebugLevel) {
		v = fmt.Sprint(klogMaxV)
	}
	// klog checks its verbosity before calling the sink: V(n) above it
	// costs nothing. Set is safe while others log.
	klogSetMu.Lock()
	defer klogSetMu.Unlock()
	_ = klogFlags.Set("v", v)
}

// klogSink is a logr.LogSink over the current klog target.
type klogSink struct {
	depth  int // call frames between the sink and the klog call, klog's and logr's
	name   string
	fields []zap.Field
}

var _ logr.CallDepthLogSink = (*klogSink)(nil)

func (s *klogSink) Init(ri logr.RuntimeInfo) { s.depth += ri.CallDepth }

func (s *klogSink) Enabled(level int) bool {
	l := klogTarget.Load()
	return l != nil && level <= klogMaxV && l.Core().Enabled(zapLevel(level))
}

func zapLevel(v int) zapcore.Level {
	if v > 0 {
		return zapcore.DebugLevel
	}
	return zapcore.InfoLevel
}

// logger is the target with the sink's name, values and the caller of
// the klog call (the sink's own frame is the 1).
func (s *klogSink) logger() *zap.Logger {
	l := klogTarget.Load()
	if l == nil {
		return nil
	}
	if s.name != "" {
		l = l.Named(s.name)
	}
	return l.WithOptions(zap.AddCallerSkip(1 + s.depth)).With(s.fields...)
}

func (s *klogSink) Info(level int, msg string, kv ...any) {
	if level > klogMaxV {
		return
	}
	if l := s.logger(); l != nil {
		l, fields := named(l, kvFields(kv))
		if ce := l.Check(zapLevel(level), msg); ce != nil {
			ce.Write(fields...)
		}
	}
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	if l := s.logger(); l != nil {
		l, fields := named(l, kvFields(kv))
		if err != nil {
			fields = append(fields, zap.Error(err))
		}
		l.Error(msg, fields...)
	}
}

// named takes klog's "logger" value (klog's own logr names a logger so,
// e.g. UnhandledError) into l's name, where a second "logger" key in
// the line would clash with zap's.
func named(l *zap.Logger, fields []zap.Field) (*zap.Logger, []zap.Field) {
	for i, f := range fields {
		if f.Key == "logger" && f.Type == zapcore.StringType {
			return l.Named(f.String), append(fields[:i:i], fields[i+1:]...)
		}
	}
	return l, fields
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.fields = append(append([]zap.Field(nil), s.fields...), kvFields(kv)...)
	return &c
}

func (s *klogSink) WithName(name string) logr.LogSink {
	c := *s
	if c.name != "" {
		name = c.name + "." + name
	}
	c.name = name
	return &c
}

func (s *klogSink) WithCallDepth(depth int) logr.LogSink {
	c := *s
	c.depth += depth
	return &c
}

// reserved are the keys of every line (NewFormatted's encoder).
var reserved = map[string]bool{"level": true, "time": true, "msg": true, "caller": true, "stacktrace": true}

// kvFields turns logr's alternating keys and values into zap fields; a
// key that is not a string is printed, a value missing is said so, a key
// of the line itself is prefixed with "klog.".
func kvFields(kv []any) []zap.Field {
	fields := make([]zap.Field, 0, (len(kv)+1)/2)
	for i := 0; i < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		if reserved[key] {
			key = "klog." + key // not to clash with the line's own keys
		}
		if i+1 == len(kv) {
			fields = append(fields, zap.String(key, "(MISSING)"))
			break
		}
		fields = append(fields, zap.Any(key, kv[i+1]))
	}
	return fields
}
