package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dcm-project/dcm/platform/errs"
)

// readHeaderTimeout is the time a client gets to send a request's headers:
// 10 seconds, or the whole request's read timeout when that is shorter (a
// header that stalls is then cut at the read timeout too).
func readHeaderTimeout(read time.Duration) time.Duration {
	if read > 0 && read < 10*time.Second {
		return read
	}
	return 10 * time.Second
}

// limitBody bounds request bodies to max bytes without reading any of
// them: the handler reads a body when it decided to serve the request
// (the gateway: after authentication and the route's authorization), so a
// client without a credential, or one the route refuses, makes the server
// hold nothing but what net/http buffers itself.
//
//   - A declared Content-Length above max is refused with 413 before the
//     handler runs, nothing read.
//   - Any other body is wrapped in http.MaxBytesReader: a read past max
//     fails with *http.MaxBytesError, which the handler answers with 413
//     (WriteTooLarge). Memory stays bounded by max per request, whatever
//     the client sends.
//   - An answer written before the body was read to its end closes an
//     HTTP/1 connection rather than draining it (net/http would otherwise
//     read up to 256 KiB of it first, and wait for a body that never ends).
//
// A handler that must see a chunked body whole (a JSON decoder stops after
// the first value, so an object followed by 400 MB would otherwise be
// served) reads it to the end itself; the gateway does (readBody).
func limitBody(max int64, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if max > 0 && r.ContentLength > max {
			w.Header().Set("Connection", "close")
			writeTooLarge(w, max)
			return
		}
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		if max > 0 {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		if r.ProtoMajor != 1 {
			// HTTP/2 resets a stream whose body was left; no draining.
			h.ServeHTTP(w, r)
			return
		}
		body := &trackedBody{ReadCloser: r.Body}
		r.Body = body
		h.ServeHTTP(&closeUnread{ResponseWriter: w, body: body}, r)
	})
}

// trackedBody notes whether a body was read to its end.
type trackedBody struct {
	io.ReadCloser
	ended atomic.Bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.ended.Store(true) // EOF, or a failure after which nothing more is read
	}
	return n, err
}

// closeUnread closes the connection after an answer written while the
// request's body was not read to its end.
type closeUnread struct {
	http.ResponseWriter
	body        *trackedBody
	wroteHeader bool
}

func (w *closeUnread) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		if !w.body.ended.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeUnread) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *closeUnread) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *closeUnread) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TooLarge answers 413 in the error format when err is a read past
// DCM_MAX_BODY_BYTES (*http.MaxBytesError) and reports whether it did.
func TooLarge(w http.ResponseWriter, err error) bool {
	var tooLarge *http.MaxBytesError
	if !errors.As(err, &tooLarge) {
		return false
	}
	w.Header().Set("Connection", "close")
	writeTooLarge(w, tooLarge.Limit)
	return true
}

func writeTooLarge(w http.ResponseWriter, max int64) {
	errs.WriteHTTPStatus(w, http.StatusRequestEntityTooLarge,
		status.New(codes.ResourceExhausted, fmt.Sprintf("request body exceeds %d bytes (DCM_MAX_BODY_BYTES)", max)))
}
