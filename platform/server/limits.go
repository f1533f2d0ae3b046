package server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
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

// limitBody refuses request bodies above max bytes with 413, before the
// handler sees them: a declared Content-Length above it before anything is
// read; a body of unknown length (chunked) is read up to max+1 bytes first,
// and refused if it goes past. Memory stays bounded by max per request,
// whatever the client sends: the rest is never read, and the connection is
// closed rather than drained.
//
// Reading a chunked body whole matters: a JSON decoder stops after the
// first value, so an object followed by 400 MB would otherwise be served.
func limitBody(max int64, h http.Handler) http.Handler {
	if max <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.ContentLength > max:
			w.Header().Set("Connection", "close")
			writeTooLarge(w, max)
			return
		case r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody:
			b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
			if int64(len(b)) > max {
				w.Header().Set("Connection", "close")
				writeTooLarge(w, max)
				return
			}
			if err != nil {
				w.Header().Set("Connection", "close")
				errs.WriteHTTP(w, status.New(codes.InvalidArgument, "reading the request body failed"))
				return
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		case r.Body != nil && r.Body != http.NoBody:
			// A declared length is enforced by the server; this is a second guard.
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		h.ServeHTTP(w, r)
	})
}

func writeTooLarge(w http.ResponseWriter, max int64) {
	errs.WriteHTTPStatus(w, http.StatusRequestEntityTooLarge,
		status.New(codes.ResourceExhausted, fmt.Sprintf("request body exceeds %d bytes (DCM_MAX_BODY_BYTES)", max)))
}
