package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/dcm-project/dcm/platform/errs"
)

// Limits are the bounds the gateway applies to status watches.
type Limits struct {
	// WatchMax is the longest a status watch runs (core ends it there).
	WatchMax time.Duration
	// WriteTimeout is the HTTP server's write timeout (DCM_HTTP_WRITE_TIMEOUT).
	WriteTimeout time.Duration
	// MaxWatches is how many status watches one credential may have open
	// at once (DCM_MAX_WATCHES); 0 is no maximum.
	MaxWatches int
	// Dialect is the REST dialect of answers to requests that name none
	// (DCM_GATEWAY_DIALECT; docs/emco.md).
	Dialect string
}

// isWatch reports whether r is a status watch, in either spelling.
func isWatch(r *http.Request) bool {
	return r.Method == http.MethodGet && (strings.HasSuffix(r.URL.Path, "/status/watch") ||
		strings.HasSuffix(r.URL.Path, "/status") && r.URL.Query().Get("watch") == "true")
}

// watchParam serves GET .../status?watch=true, the documented spelling, by
// the streaming route .../status/watch, and bounds watches:
//
//   - The HTTP server's write timeout would cut a watch stream after
//     DCM_HTTP_WRITE_TIMEOUT; a watch gets WatchMax (when core ends it)
//     plus that timeout instead, so a stalled reader is still disconnected.
//   - One credential (the identity secure authenticated) holds at most
//     MaxWatches at once; past it, 429.
//   - An error before the stream began answers as on every other route
//     (watchErrors).
func watchParam(limits Limits, h http.Handler) http.Handler {
	slots := &watchSlots{max: limits.MaxWatches, open: map[string]int{}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isWatch(r) {
			h.ServeHTTP(w, r)
			return
		}
		id := auditOf(r.Context()).id
		key := id.Method + "\x00" + id.Subject + "\x00" + id.Role + "\x00" + id.Project
		if !slots.take(key) {
			errs.WriteHTTP(w, status.New(codes.ResourceExhausted,
				fmt.Sprintf("at most %d status watches at once per credential (DCM_MAX_WATCHES): end one first", limits.MaxWatches)))
			return
		}
		defer slots.give(key)
		var deadline time.Time // none: no write timeout, or no maximum
		if limits.WriteTimeout > 0 && limits.WatchMax > 0 {
			deadline = time.Now().Add(limits.WatchMax + limits.WriteTimeout)
		}
		_ = http.NewResponseController(w).SetWriteDeadline(deadline)
		if strings.HasSuffix(r.URL.Path, "/status") {
			r = r.Clone(r.Context())
			r.URL.Path += "/watch"
			r.URL.RawPath = ""
			q := r.URL.Query()
			q.Del("watch")
			r.URL.RawQuery = q.Encode()
		}
		ww := &watchWriter{ResponseWriter: w}
		h.ServeHTTP(ww, r)
		ww.finish(r)
	})
}

// watchWriter answers the errors of a status watch that come before its
// stream began as every other route does: the gateway's error body
// (writeError, platform/errs) with errs' HTTP status.
//
// grpc-gateway writes a server-streaming call's errors itself, in its
// stream shape ({"error": <google.rpc.Status>}) and with its own mapping of
// gRPC codes (a FailedPrecondition is 400 there, 409 here), even when
// nothing was written yet: runtime.WithStreamErrorHandler only chooses the
// status, never the body or the HTTP status (grpc-gateway v2's
// handleForwardResponseStreamError), and the core's errors (a logical cloud
// that does not exist) arrive with the first Recv, after the call started.
// So a first WriteHeader >= 400 is held with the body that follows; if
// that body is grpc-gateway's error chunk, the status it carries (code,
// message and details, so field and reason) is written by writeError
// instead; any other held answer (the gateway's own errors, already in
// errs' shape) goes out unchanged. Once a header or a byte went out, the
// writer only passes through: an error after the first status line stays
// in the 200 stream, as its last line {"error": ...}.
type watchWriter struct {
	http.ResponseWriter
	started bool
	held    int // the status held, 0 if none
	body    bytes.Buffer
}

func (w *watchWriter) WriteHeader(code int) {
	switch {
	case w.held != 0:
	case !w.started && code >= http.StatusBadRequest:
		w.held = code
	default:
		w.started = true
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *watchWriter) Write(b []byte) (int, error) {
	if w.held != 0 {
		return w.body.Write(b)
	}
	w.started = true
	return w.ResponseWriter.Write(b)
}

// Flush sends what was written, unless an error answer is held.
func (w *watchWriter) Flush() {
	if w.held != 0 {
		return
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.started = true
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *watchWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes the held error answer, if any.
func (w *watchWriter) finish(r *http.Request) {
	if w.held == 0 {
		return
	}
	if st := streamError(w.body.Bytes()); st != nil {
		writeError(r.Context(), nil, nil, w.ResponseWriter, r, st.Err())
		return
	}
	w.ResponseWriter.WriteHeader(w.held)
	_, _ = w.ResponseWriter.Write(w.body.Bytes())
}

// streamError is the status in grpc-gateway's stream error chunk
// ({"error": <google.rpc.Status>}, then its delimiter), nil if b is not one.
func streamError(b []byte) *status.Status {
	var chunk map[string]json.RawMessage
	if json.Unmarshal(b, &chunk) != nil || len(chunk) != 1 || chunk["error"] == nil {
		return nil
	}
	var p spb.Status
	if protojson.Unmarshal(chunk["error"], &p) != nil || p.GetCode() == int32(codes.OK) {
		return nil
	}
	return status.FromProto(&p)
}

// watchSlots counts the open watches per credential.
type watchSlots struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

func (s *watchSlots) take(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && s.open[key] >= s.max {
		return false
	}
	s.open[key]++
	return true
}

func (s *watchSlots) give(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[key]--; s.open[key] <= 0 {
		delete(s.open, key)
	}
}
