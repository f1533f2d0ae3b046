package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
		h.ServeHTTP(w, r)
	})
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
