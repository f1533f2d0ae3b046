package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.uber.org/zap"
)

// Embedded is an in-process FerretDB (SQLite files under a directory) behind
// a Serializer. The backend can be stopped and started again behind the same
// client address, which is how tests take the store down and bring it back.
type Embedded struct {
	dir string
	log *zap.Logger
	ser *Serializer

	mu     sync.Mutex
	addr   string // backend address, "" while stopped
	cancel context.CancelFunc
	done   chan struct{}
}

// StartEmbedded starts FerretDB with its SQLite files in dir (created 0700)
// and a serializer on a free loopback port.
func StartEmbedded(dir string, log *zap.Logger) (*Embedded, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded store dir: %w", err)
	}
	e := &Embedded{dir: dir, log: log}
	if err := e.StartBackend(); err != nil {
		return nil, err
	}
	ser, err := NewSerializer("127.0.0.1:0", e.backendAddr)
	if err != nil {
		e.StopBackend()
		return nil, err
	}
	e.ser = ser
	return e, nil
}

// URI is the MongoDB URI clients use. Server monitoring polls: streaming
// (exhaust) hello would hold the serializer between heartbeats.
func (e *Embedded) URI() string {
	return (&url.URL{
		Scheme:   "mongodb",
		Host:     e.ser.Addr(),
		Path:     "/",
		RawQuery: "serverMonitoringMode=poll",
	}).String()
}

func (e *Embedded) backendAddr() (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.addr == "" {
		return "", errors.New("embedded store is stopped")
	}
	return e.addr, nil
}

var newMu sync.Mutex

// StartBackend starts FerretDB if it is stopped.
func (e *Embedded) StartBackend() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.addr != "" {
		return nil
	}
	// ferretdb.New writes a package global (its version info): stores
	// started at once (parallel tests) must not race on it.
	newMu.Lock()
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Handler:   "sqlite",
		SQLiteURL: (&url.URL{Scheme: "file", Opaque: filepath.ToSlash(e.dir) + "/"}).String(),
		Logger:    slog.New(zapHandler{e.log.Named("ferretdb")}),
	})
	newMu.Unlock()
	if err != nil {
		return fmt.Errorf("start embedded store: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(ctx)
	}()
	u, err := url.Parse(f.MongoDBURI()) // blocks until FerretDB listens
	if err != nil {
		cancel()
		<-done
		return fmt.Errorf("embedded store address: %w", err)
	}
	e.addr, e.cancel, e.done = u.Host, cancel, done
	return nil
}

// StopBackend stops FerretDB; clients see a store outage until StartBackend.
func (e *Embedded) StopBackend() {
	e.mu.Lock()
	cancel, done := e.cancel, e.done
	e.addr, e.cancel, e.done = "", nil, nil
	e.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Close stops the serializer and FerretDB.
func (e *Embedded) Close() {
	if e.ser != nil {
		_ = e.ser.Close()
	}
	e.StopBackend()
}

// zapHandler sends FerretDB's slog records at error level to zap. Below
// that it logs every connection and every failed command (the driver's
// endSessions, which it lacks, at each disconnect): noise for us.
type zapHandler struct{ l *zap.Logger }

func (h zapHandler) Enabled(_ context.Context, lvl slog.Level) bool { return lvl >= slog.LevelError }

func (h zapHandler) Handle(_ context.Context, r slog.Record) error {
	fields := make([]zap.Field, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		fields = append(fields, zap.Any(a.Key, a.Value.Any()))
		return true
	})
	h.l.Error(r.Message, fields...)
	return nil
}

func (h zapHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	fields := make([]zap.Field, 0, len(attrs))
	for _, a := range attrs {
		fields = append(fields, zap.Any(a.Key, a.Value.Any()))
	}
	return zapHandler{h.l.With(fields...)}
}

func (h zapHandler) WithGroup(name string) slog.Handler { return zapHandler{h.l.Named(name)} }
