package gateway

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// streamHandler serves a server-streaming call the way grpc-gateway's
// generated handler does (runtime.ForwardResponseStream, the gateway's
// JSON options): msgs, then err (none: the stream ends cleanly).
func streamHandler(msgs []proto.Message, err error) http.Handler {
	mux := runtime.NewServeMux()
	marshaler := &runtime.JSONPb{MarshalOptions: protojson.MarshalOptions{EmitUnpopulated: true}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := runtime.NewServerMetadataContext(r.Context(), runtime.ServerMetadata{})
		i := 0
		runtime.ForwardResponseStream(ctx, mux, marshaler, w, r, func() (proto.Message, error) {
			if i < len(msgs) {
				i++
				return msgs[i-1], nil
			}
			if err != nil {
				return nil, err
			}
			return nil, io.EOF
		})
	})
}

// serveWatch sends a status watch to h behind watchParam.
func serveWatch(h http.Handler) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	watchParam(Limits{}, h).ServeHTTP(w, httptest.NewRequest("GET", "/v2/projects/p/logical-clouds/lc/status?watch=true", nil))
	return w
}

// errsAnswer is what errs.WriteHTTP answers for err, as every other route does.
func errsAnswer(err error) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	errs.WriteHTTP(w, errs.ToStatus(err))
	return w
}

// TestWatchErrorsBeforeTheStream: an error the service returns before the
// watch's first status is answered with errs' status and body (field and
// reason kept), not grpc-gateway's stream shape and mapping.
func TestWatchErrorsBeforeTheStream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		err    error
		code   int
		field  string
		reason errs.Reason
	}{
		{"missing", errs.NotFound("logical cloud p/lc not found"), 404, "", ""},
		{"forbidden state", errs.Because(errs.ReasonWrongState, "p/lc is Terminating"), 409, "", errs.ReasonWrongState},
		{"bad parameter", errs.Invalid("logical-cloud", "not a DNS-1123 label"), 400, "logical-cloud", ""},
		{"service down", status.Error(codes.Unavailable, "rsync is down"), 503, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := streamHandler(nil, errs.ToStatus(tc.err).Err())
			got := serveWatch(h)
			want := errsAnswer(tc.err)
			require.Equal(t, tc.code, got.Code, "%s", got.Body)
			require.Equal(t, want.Code, got.Code)
			require.JSONEq(t, want.Body.String(), got.Body.String())
			require.Equal(t, "application/json", got.Header().Get("Content-Type"))
			var body errs.Body
			require.NoError(t, json.Unmarshal(got.Body.Bytes(), &body))
			require.Equal(t, tc.field, body.Field)
			require.Equal(t, tc.reason, body.Reason)

			// Without watchParam, grpc-gateway answers in its own shape:
			// what watchWriter is there for.
			bare := httptest.NewRecorder()
			h.ServeHTTP(bare, httptest.NewRequest("GET", "/v2/projects/p/logical-clouds/lc/status/watch", nil))
			require.Contains(t, bare.Body.String(), `"error":`)
			require.Equal(t, runtime.HTTPStatusFromCode(errs.Code(tc.err)), bare.Code)
		})
	}
}

// TestWatchErrorsInTheStream: once a status went out (200), a later error
// stays in the stream as its last line, grpc-gateway's {"error": ...}.
func TestWatchErrorsInTheStream(t *testing.T) {
	t.Parallel()
	first := &corev1.WatchLogicalCloudStatusResponse{Status: &corev1.LogicalCloudStatus{Project: "p", LogicalCloud: "lc", State: "Instantiating"}}
	got := serveWatch(streamHandler([]proto.Message{first}, errs.ToStatus(errs.NotFound("logical cloud p/lc not found")).Err()))
	require.Equal(t, 200, got.Code)
	sc := bufio.NewScanner(got.Body)
	var lines []map[string]json.RawMessage
	for sc.Scan() {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "%s", sc.Text())
		lines = append(lines, m)
	}
	require.Len(t, lines, 2)
	require.Contains(t, string(lines[0]["result"]), `"Instantiating"`)
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(lines[1]["error"], &e), "%s", lines[1])
	require.Equal(t, int(codes.NotFound), e.Code)
	require.Equal(t, "logical cloud p/lc not found", e.Message)

	// A stream that ends cleanly is unchanged.
	got = serveWatch(streamHandler([]proto.Message{first, first}, nil))
	require.Equal(t, 200, got.Code)
	require.Equal(t, 2, strings.Count(got.Body.String(), `"result":`), "%s", got.Body)
	require.NotContains(t, got.Body.String(), `"error"`)
}

// TestWatchOwnErrorsUnchanged: the gateway's own error answers on a watch
// (a role refused, a request it cannot decode) are in errs' shape
// already and go out as they were written, headers included.
func TestWatchOwnErrorsUnchanged(t *testing.T) {
	t.Parallel()
	own := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="dcm"`)
		errs.WriteHTTP(w, status.New(codes.Unauthenticated, "no credential"))
	})
	got := serveWatch(own)
	want := httptest.NewRecorder()
	own.ServeHTTP(want, httptest.NewRequest("GET", "/", nil))
	require.Equal(t, 401, got.Code)
	require.Equal(t, want.Body.String(), got.Body.String())
	require.Equal(t, `Bearer realm="dcm"`, got.Header().Get("WWW-Authenticate"))
}
