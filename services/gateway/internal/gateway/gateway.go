// Package gateway translates the documented REST URLs into gRPC calls to the
// services (grpc-gateway v2), with the API's JSON keys, status codes and
// error bodies. It holds no state and no business rules.
package gateway

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/gateway/internal/openapi"
)

// Conns are the gRPC connections to the services the gateway routes to.
type Conns struct {
	Core *grpc.ClientConn
}

// New returns the REST handler.
func New(ctx context.Context, conns Conns) (http.Handler, error) {
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}),
		runtime.WithErrorHandler(writeError),
		runtime.WithRoutingErrorHandler(routingError),
		runtime.WithForwardResponseOption(setStatus),
		runtime.WithIncomingHeaderMatcher(headerMatcher),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
	)
	if err := corev1.RegisterCoreServiceHandler(ctx, mux, conns.Core); err != nil {
		return nil, fmt.Errorf("register core routes: %w", err)
	}
	root := http.NewServeMux()
	root.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openapi.Document)
	})
	root.Handle("/", noBodyOn204(mux))
	return root, nil
}

// writeError is the gateway's one error path: the status from the service
// (or from decoding the request) becomes errs' HTTP status and JSON body.
func writeError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
	st := errs.ToStatus(err)
	if st.Code() == codes.InvalidArgument && errs.FieldOf(st) == "" {
		st = decodeError(st.Message())
	}
	errs.WriteHTTP(w, st)
}

// Services name the field of every InvalidArgument they return, so one
// without a field comes from decoding the request here: malformed JSON, an
// unknown field, a value of the wrong type or a bad path parameter.
// protojson names the field in its message; we lift it into the body.
var decodeField = []*regexp.Regexp{
	regexp.MustCompile(`unknown field "([^"]+)"`),
	regexp.MustCompile(`invalid value for [a-z0-9 ]*field ([A-Za-z0-9_-]+)`),
	regexp.MustCompile(`parsing field "([^"]+)"`),
}

var protoPrefix = regexp.MustCompile(`^proto: (\(line \d+:\d+\): )?`)

func decodeError(msg string) *status.Status {
	field := "body"
	for _, re := range decodeField {
		if m := re.FindStringSubmatch(msg); m != nil {
			field = m[1]
			break
		}
	}
	msg = strings.TrimSpace(protoPrefix.ReplaceAllString(msg, ""))
	return errs.ToStatus(errs.Invalid(field, "invalid request: %s", msg))
}

// routingError answers URLs and methods that no route serves.
func routingError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	c := codes.NotFound
	if code == http.StatusMethodNotAllowed {
		c = codes.Unimplemented
	}
	errs.WriteHTTPStatus(w, code, status.New(c, "no route for "+r.Method+" "+r.URL.Path))
}

// setStatus answers 201 to Create* calls and 204 to Delete* calls, as the
// API documents; every other call answers 200.
func setStatus(ctx context.Context, w http.ResponseWriter, _ proto.Message) error {
	method, ok := runtime.RPCMethod(ctx)
	if !ok {
		return nil
	}
	name := method[strings.LastIndex(method, "/")+1:]
	switch {
	case strings.HasPrefix(name, "Create"):
		w.WriteHeader(http.StatusCreated)
	case strings.HasPrefix(name, "Delete"):
		w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

// headerMatcher forwards the request id besides grpc-gateway's defaults.
func headerMatcher(key string) (string, bool) {
	if strings.EqualFold(key, server.RequestIDHeader) {
		return server.RequestIDHeader, true
	}
	return runtime.DefaultHeaderMatcher(key)
}

// noBodyOn204 drops the "{}" grpc-gateway writes after a 204.
func noBodyOn204(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&statusWriter{ResponseWriter: w}, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code != 0 {
		return
	}
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.code == http.StatusNoContent {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
