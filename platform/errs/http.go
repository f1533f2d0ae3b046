package errs

import (
	"encoding/json"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// HTTPStatus maps a gRPC code to the HTTP status REST callers see. Aborted
// (a lost concurrency race) and FailedPrecondition (a forbidden state) are
// both 409 Conflict, as the API documents.
func HTTPStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.InvalidArgument, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted, codes.FailedPrecondition:
		return http.StatusConflict
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case codes.Canceled:
		return 499
	default:
		return http.StatusInternalServerError
	}
}

// Body is the JSON error body every REST error carries.
type Body struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Reason tells apart conflicts a client reacts to differently
	// (WRONG_STATE, STILL_DELETING, REFERENCED, OWNED_BY_OTHER, ...).
	Reason Reason `json:"reason,omitempty"`
}

// WriteHTTP writes st as an HTTP error response.
func WriteHTTP(w http.ResponseWriter, st *status.Status) {
	WriteHTTPStatus(w, HTTPStatus(st.Code()), st)
}

// WriteHTTPStatus writes st with an explicit HTTP status (for the few HTTP
// conditions gRPC has no code for, such as 405).
func WriteHTTPStatus(w http.ResponseWriter, code int, st *status.Status) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(Body{
		Code:    code,
		Status:  st.Code().String(),
		Message: st.Message(),
		Field:   FieldOf(st),
		Reason:  ReasonOf(st),
	})
}
