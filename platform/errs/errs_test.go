package errs_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dcm-project/dcm/platform/errs"
)

// TestReasons: a reason survives the trip through a gRPC status (as a
// google.rpc.ErrorInfo) and shows in the REST body; errors without one
// show none.
func TestReasons(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err    error
		code   codes.Code
		http   int
		reason errs.Reason
	}{
		{errs.Because(errs.ReasonWrongState, "logical cloud %q is %s", "lc", "Instantiating"), codes.FailedPrecondition, 409, errs.ReasonWrongState},
		{errs.Because(errs.ReasonOwnedByOther, "taken"), codes.FailedPrecondition, 409, errs.ReasonOwnedByOther},
		{errs.Aborted("changed"), codes.Aborted, 409, errs.ReasonConcurrentUpdate},
		{errs.FailedPrecondition("plain"), codes.FailedPrecondition, 409, ""},
		{errs.Invalid("spec.x", "bad"), codes.InvalidArgument, 400, ""},
		{errors.New("boom"), codes.Internal, 500, ""},
	}
	for _, c := range cases {
		// Across gRPC: the status travels as its proto.
		st := status.FromProto(errs.ToStatus(c.err).Proto())
		require.Equal(t, c.code, st.Code())
		require.Equal(t, c.reason, errs.ReasonOf(st), "%v", c.err)
		w := httptest.NewRecorder()
		errs.WriteHTTP(w, st)
		require.Equal(t, c.http, w.Code)
		var body map[string]any
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body))
		if c.reason == "" {
			require.NotContains(t, body, "reason")
		} else {
			require.Equal(t, string(c.reason), body["reason"])
		}
	}
	// A field and a reason together.
	e := &errs.Error{Code: codes.FailedPrecondition, Msg: "m", Field: "f", Reason: errs.ReasonReferenced}
	st := status.FromProto(e.GRPCStatus().Proto())
	require.Equal(t, "f", errs.FieldOf(st))
	require.Equal(t, errs.ReasonReferenced, errs.ReasonOf(st))
}
