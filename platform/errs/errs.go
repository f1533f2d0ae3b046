// Package errs is the one place where domain errors become gRPC statuses and
// gRPC statuses become HTTP statuses with a JSON body. Services return errors
// built here; the server interceptor and the gateway error handler do the
// translation. It must not know about any service.
package errs

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
)

// Error is a domain error with the gRPC code it maps to. Field names the
// offending request field for InvalidArgument errors; Reason tells apart
// the conflicts a client reacts to differently (a google.rpc.ErrorInfo).
type Error struct {
	Code   codes.Code
	Msg    string
	Field  string
	Reason Reason
	cause  error
}

// Reason is a machine-readable cause of an error (google.rpc.ErrorInfo's
// reason, in domain Domain), shown as "reason" in REST error bodies: a
// client branches on it, never on the message.
type Reason string

// Domain is the ErrorInfo domain of DCM's reasons.
const Domain = "dcm.io"

// The reasons clients must tell apart.
const (
	// ReasonWrongState: the logical cloud's lifecycle state forbids the
	// call (apply while Instantiating, delete while Instantiated, ...).
	ReasonWrongState Reason = "WRONG_STATE"
	// ReasonStillDeleting: the record is being deleted; retry shortly.
	ReasonStillDeleting Reason = "STILL_DELETING"
	// ReasonReferenced: others still refer to it (a cluster a logical cloud
	// uses, a project with logical clouds); remove those first.
	ReasonReferenced Reason = "REFERENCED"
	// ReasonOwnedByOther: the object on a cluster belongs to another
	// logical cloud (another owner).
	ReasonOwnedByOther Reason = "OWNED_BY_OTHER"
	// ReasonNotManaged: the object exists on a cluster and DCM did not
	// create it.
	ReasonNotManaged Reason = "NOT_MANAGED"
	// ReasonConcurrentUpdate: the record changed since it was read (a lost
	// optimistic-concurrency race); read it again and retry.
	ReasonConcurrentUpdate Reason = "CONCURRENT_UPDATE"
	// ReasonNotIssued: a credential the cluster makes (certificate, token)
	// is not there yet; wait for the status to settle.
	ReasonNotIssued Reason = "NOT_ISSUED"
	// ReasonMeshLimit: the project has as many logical clouds with the
	// service mesh enabled as the installation allows.
	ReasonMeshLimit Reason = "MESH_LIMIT"
	// ReasonLastUser: the user is the logical cloud's last; a logical
	// cloud keeps at least one.
	ReasonLastUser Reason = "LAST_USER"
)

// Error implements error.
func (e *Error) Error() string {
	if e.cause != nil {
		return e.Msg + ": " + e.cause.Error()
	}
	return e.Msg
}

// Unwrap exposes the cause for errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.cause }

// GRPCStatus maps the error to a status; the cause stays out of the message
// that callers see, since it may carry internal detail.
func (e *Error) GRPCStatus() *status.Status {
	st := status.New(e.Code, e.Msg)
	var details []protoadapt.MessageV1
	if e.Field != "" {
		details = append(details, &errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: e.Field, Description: e.Msg}},
		})
	}
	if e.Reason != "" {
		details = append(details, &errdetails.ErrorInfo{Reason: string(e.Reason), Domain: Domain})
	}
	if len(details) == 0 {
		return st
	}
	with, err := st.WithDetails(details...)
	if err != nil {
		return st
	}
	return with
}

// Because is a conflict (FailedPrecondition) with a reason.
func Because(reason Reason, format string, args ...any) error {
	e := newf(codes.FailedPrecondition, format, args...)
	e.Reason = reason
	return e
}

func newf(code codes.Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// NotFound reports a missing record.
func NotFound(format string, args ...any) error { return newf(codes.NotFound, format, args...) }

// AlreadyExists reports a duplicate name.
func AlreadyExists(format string, args ...any) error {
	return newf(codes.AlreadyExists, format, args...)
}

// Invalid reports bad input in the named field (a dotted path as the caller wrote it).
func Invalid(field, format string, args ...any) error {
	e := newf(codes.InvalidArgument, format, args...)
	e.Field = field
	if e.Msg == "" || field == "" {
		return e
	}
	e.Msg = field + ": " + e.Msg
	return e
}

// Forbidden reports a request the caller's role does not allow, naming the
// field that asked for it (empty: none) and, in the message, the rule.
func Forbidden(field, format string, args ...any) error {
	e := newf(codes.PermissionDenied, format, args...)
	e.Field = field
	if field != "" {
		e.Msg = field + ": " + e.Msg
	}
	return e
}

// FailedPrecondition reports a request that the current state forbids.
func FailedPrecondition(format string, args ...any) error {
	return newf(codes.FailedPrecondition, format, args...)
}

// Aborted reports a lost optimistic-concurrency race: the record changed
// since it was read. Retrying the whole operation is safe. Its reason is
// ReasonConcurrentUpdate.
func Aborted(format string, args ...any) error {
	e := newf(codes.Aborted, format, args...)
	e.Reason = ReasonConcurrentUpdate
	return e
}

// Unavailable reports a dependency that is down; cause is kept for logs only.
func Unavailable(cause error, format string, args ...any) error {
	e := newf(codes.Unavailable, format, args...)
	e.cause = cause
	return e
}

// Internal reports a bug or an unexpected failure; cause is kept for logs only.
func Internal(cause error, format string, args ...any) error {
	e := newf(codes.Internal, format, args...)
	e.cause = cause
	return e
}

// ToStatus turns any error returned by a handler into the status the caller
// sees. Domain errors and gRPC statuses pass through; context errors become
// their gRPC codes; anything else is an internal error whose detail is not
// shown (the caller logs it).
func ToStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	var de *Error
	if errors.As(err, &de) {
		return de.GRPCStatus()
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.New(codes.Canceled, "request canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.New(codes.DeadlineExceeded, "deadline exceeded")
	}
	return status.New(codes.Internal, "internal error")
}

// FieldOf returns the offending field recorded in a status, if any.
func FieldOf(st *status.Status) string {
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) > 0 {
			return br.GetFieldViolations()[0].GetField()
		}
	}
	return ""
}

// ReasonOf returns the reason recorded in a status, if any.
func ReasonOf(st *status.Status) Reason {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == Domain {
			return Reason(ei.GetReason())
		}
	}
	return ""
}

// Code is the gRPC code err maps to (OK for nil).
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	return ToStatus(err).Code()
}
