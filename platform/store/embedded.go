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
// a Serializer, both on unix sockets in that 0700 directory, so only this
// program's user (and root) can connect; there is no TCP listener. The
// backend can be stopped and started again behind the same client socket,
// which is how tests take the store down and bring it back.
type Embedded struct {
	dir     string
	sockets string // directory of the sockets: dir, or tmp when dir's path is too long
	tmp     string // a private directory made for the sockets, removed at Close
	log     *zap.Logger
	ser     *Serializer
	lock    *dirLock

	mu     sync.Mutex
	addr   string // backend socket, "" while stopped
	cancel context.CancelFunc
	done   chan struct{}
}

// Socket names in the socket directory. The driver takes a host ending in
// "sock" for a unix socket path.
const (
	clientSocket  = "dcm.sock"
	backendSocket = "ferretdb.sock"
)

// maxSocketPath is the longest unix socket path every platform accepts
// (sun_path is 108 bytes on Linux, 104 on macOS, with its final NUL).
const maxSocketPath = 103

// StartEmbedded starts FerretDB with its SQLite files in dir (created, or
// made 0700 if it was not) and a serializer in front of it; clients use
// URI. Both listen on unix sockets in dir, or, if dir's path is too long
// for a socket, in a fresh private directory removed at Close. dir is
// locked until Close: a second program on it fails at once, naming the
// holder's pid.
func StartEmbedded(dir string, log *zap.Logger) (*Embedded, error) {
	if err := privateDir(dir); err != nil {
		return nil, fmt.Errorf("embedded store dir: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	e := &Embedded{dir: dir, sockets: dir, log: log, lock: lock}
	if !socketPathOK(dir) {
		tmp, err := shortPrivateDir()
		if err != nil {
			lock.unlock()
			return nil, fmt.Errorf("embedded store: %s cannot hold its unix sockets (a path of at most %d bytes, without ':'), and %w", dir, maxSocketPath-len(backendSocket)-1, err)
		}
		e.sockets, e.tmp = tmp, tmp
	}
	if err := e.StartBackend(); err != nil {
		e.removeTmp()
		lock.unlock()
		return nil, err
	}
	ser, err := NewSerializer(filepath.Join(e.sockets, clientSocket), e.backendAddr)
	if err != nil {
		e.StopBackend()
		e.removeTmp()
		lock.unlock()
		return nil, err
	}
	e.ser = ser
	return e, nil
}

// URI is the MongoDB URI clients use: the serializer's socket path,
// escaped, as the host. Programs of the same user may share the store
// through it (DCM_MONGO_URI_FILE). Server monitoring polls: streaming
// (exhaust) hello would hold the serializer between heartbeats.
func (e *Embedded) URI() string {
	return "mongodb://" + url.QueryEscape(e.ser.Addr()) + "/?serverMonitoringMode=poll"
}

// SocketDir is the directory of the store's unix sockets (mode 0700).
func (e *Embedded) SocketDir() string { return e.sockets }

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
	sock := filepath.Join(e.sockets, backendSocket)
	if err := removeStaleSocket(sock); err != nil {
		return fmt.Errorf("start embedded store: %w", err)
	}
	// ferretdb.New writes a package global (its version info): stores
	// started at once (parallel tests) must not race on it.
	newMu.Lock()
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{Unix: sock},
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
	_ = f.MongoDBURI() // blocks until FerretDB listens
	if err := os.Chmod(sock, 0o600); err != nil {
		cancel()
		<-done
		return fmt.Errorf("embedded store socket: %w", err)
	}
	e.addr, e.cancel, e.done = sock, cancel, done
	go e.indexLoop(ctx)
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

// Close stops the serializer and FerretDB, and removes the sockets'
// private directory if one was made.
func (e *Embedded) Close() {
	if e.ser != nil {
		_ = e.ser.Close()
	}
	e.StopBackend()
	e.removeTmp()
	e.lock.unlock()
}

func (e *Embedded) removeTmp() {
	if e.tmp != "" {
		_ = os.RemoveAll(e.tmp)
	}
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
