package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"buf.build/go/protovalidate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/logging"
	"github.com/dcm-project/dcm/platform/pki"
)

// RequestIDHeader is propagated from REST through gRPC into every log line.
const RequestIDHeader = "x-request-id"

var (
	rpcTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "dcm_grpc_requests_total",
		Help: "gRPC requests handled, by method and code.",
	}, []string{"method", "code"})
	rpcSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dcm_grpc_request_seconds",
		Help:    "gRPC request latency, by method.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}, []string{"method"})
)

// chain is the one interceptor chain of every service, in this order:
// recovery, authorization (with mutual TLS), validation, logging (which
// also maps errors to statuses) and metrics. Tracing is the otelgrpc stats
// handler, around all of them.
type chain struct {
	log       *zap.Logger
	validator protovalidate.Validator
	authorize bool
	// tls pins the role service to the service CA (pki.TLS.ServiceIssued).
	tls *pki.TLS
}

func (c *chain) unary() []grpc.UnaryServerInterceptor {
	return []grpc.UnaryServerInterceptor{c.recoverUnary, c.authorizeUnary, c.validateUnary, c.logUnary, c.metricsUnary}
}

func (c *chain) stream() []grpc.StreamServerInterceptor {
	return []grpc.StreamServerInterceptor{c.recoverStream, c.authorizeStream, c.validateStream, c.logStream, c.metricsStream}
}

// InternalSuffix ends the name of every internal service
// (proto/dcm/<svc>/v1/internal.proto): the contracts between DCM's own
// services, never mounted by the gateway. Who may call them is declared
// like everywhere else (access.go): core, and no admin.
const InternalSuffix = "InternalService"

// IsInternal says whether a full gRPC method name
// ("/dcm.user.v1.UserInternalService/RenderUsers") belongs to an internal
// service.
func IsInternal(fullMethod string) bool {
	svc, _, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	return strings.HasSuffix(svc, InternalSuffix)
}

// callerAllowed lets the peers that a method's allow-list names call it
// (MayCall: DCM programs by their certificate's common name, admins where
// admitted; health and reflection to both). Tenants' roles are scoped by
// the gateway, so their certificates are refused here: they must not
// bypass that scoping. The TLS handshake already checked the chain
// against the CA bundle; the role service is believed only from a
// certificate of the service CA. The returned context carries the Caller.
//
// Without TLS (DCM_INSECURE_GRPC) no certificate says who the peer is, and
// the same allow-list applies to the program the call names
// (pki.InsecureProgramKey, set by platform/client.DialInsecure): a peer
// is the DCM program it claims to be, with that program's rights and no
// more; one that names none is the least-privileged peer, served health
// and reflection only. Admins are never claimed. The claim is not a proof
// (any local process can make it): DCM_INSECURE_GRPC stays development
// only, on loopback.
func (c *chain) callerAllowed(ctx context.Context, method string) (context.Context, error) {
	id, auth := pki.Identity{}, "certificate"
	if c.authorize {
		id, _ = peerIdentity(ctx)
	} else {
		id, auth = insecurePeer(ctx), "insecure-claim"
	}
	refuse := func(why string) (context.Context, error) {
		c.log.Named(logging.AuditName).Warn("grpc call refused", append([]zap.Field{zap.String("subject", id.Subject), zap.String("role", id.Role),
			zap.String("scope", id.Project), zap.String("auth", auth), zap.String("grpc.method", method),
			zap.String("grpc.code", codes.PermissionDenied.String()), zap.Bool("ok", false), zap.String("remote", remoteOf(ctx)),
			zap.String("reason", why)}, requestIDs(ctx, requestID(ctx))...)...)
		return ctx, status.Error(codes.PermissionDenied, why)
	}
	if !c.authorize {
		if !MayCall(id, method) {
			if id.Subject == "" {
				return refuse(fmt.Sprintf("plaintext gRPC (DCM_INSECURE_GRPC): the call names no DCM program (metadata %s), and only health and reflection are served to any peer", pki.InsecureProgramKey))
			}
			return refuse(fmt.Sprintf("this method is not served to the DCM program %q (docs/security.md, who may call what)", id.Subject))
		}
		return withCaller(ctx, id), nil
	}
	if id.Role == pki.RoleService {
		if c.tls == nil {
			return refuse("no service CA to check a service certificate against")
		}
		if err := c.tls.ServiceIssued(peerChain(ctx)); err != nil {
			c.log.Info("service certificate refused", zap.Error(err))
			return refuse("the role service is accepted from the installation's service CA only")
		}
	}
	if !MayCall(id, method) {
		switch {
		case id.Project != "" || (id.Role != pki.RoleService && id.Role != pki.RoleAdmin):
			return refuse("gRPC is served to DCM services and admins only; use the REST API")
		case id.Role == pki.RoleAdmin:
			return refuse("this method is not served to admins over gRPC (docs/security.md, who may call what)")
		default:
			return refuse(fmt.Sprintf("this method is not served to the DCM program %q (docs/security.md, who may call what)", id.Subject))
		}
	}
	return withCaller(ctx, id), nil
}

func (c *chain) authorizeUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := c.callerAllowed(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (c *chain) authorizeStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := c.callerAllowed(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return h(srv, ctxStream{ss, ctx})
}

func (c *chain) recovered(method string, p any) error {
	c.log.Error("panic in handler", zap.String("method", method), zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
	return status.Error(codes.Internal, "internal error")
}

func (c *chain) recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = c.recovered(info.FullMethod, p)
		}
	}()
	return h(ctx, req)
}

func (c *chain) recoverStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = c.recovered(info.FullMethod, p)
		}
	}()
	return h(srv, ss)
}

// validate checks the protovalidate rules of a request message and reports
// the first violation as InvalidArgument naming the field.
func (c *chain) validate(req any) error {
	msg, ok := req.(proto.Message)
	if !ok {
		return nil
	}
	err := c.validator.Validate(msg)
	if err == nil {
		return nil
	}
	var ve *protovalidate.ValidationError
	if errors.As(err, &ve) && len(ve.Violations) > 0 {
		v := ve.Violations[0]
		field := jsonPath(msg.ProtoReflect().Descriptor(), v.Proto.GetField())
		return errs.Invalid(field, "%s", v.Proto.GetMessage())
	}
	return errs.Internal(err, "validation failed")
}

// jsonPath names a violated field as callers write it: each step by its
// JSON name (loadbalancer-ip, userData1), with list indexes and map keys.
func jsonPath(md protoreflect.MessageDescriptor, path *validate.FieldPath) string {
	var b strings.Builder
	for _, el := range path.GetElements() {
		name := el.GetFieldName()
		var fd protoreflect.FieldDescriptor
		if md != nil {
			fd = md.Fields().ByNumber(protoreflect.FieldNumber(el.GetFieldNumber()))
		}
		if fd != nil {
			name = fd.JSONName()
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(name)
		switch sub := el.GetSubscript().(type) {
		case *validate.FieldPathElement_Index:
			fmt.Fprintf(&b, "[%d]", sub.Index)
		case *validate.FieldPathElement_StringKey:
			fmt.Fprintf(&b, "[%q]", sub.StringKey)
		case *validate.FieldPathElement_IntKey:
			fmt.Fprintf(&b, "[%d]", sub.IntKey)
		case *validate.FieldPathElement_UintKey:
			fmt.Fprintf(&b, "[%d]", sub.UintKey)
		case *validate.FieldPathElement_BoolKey:
			fmt.Fprintf(&b, "[%t]", sub.BoolKey)
		}
		md = nil
		switch {
		case fd == nil:
		case fd.IsMap():
			md = fd.MapValue().Message()
		default:
			md = fd.Message()
		}
	}
	return b.String()
}

func (c *chain) validateUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := c.validate(req); err != nil {
		return nil, errs.ToStatus(err).Err()
	}
	return h(ctx, req)
}

type validatingStream struct {
	grpc.ServerStream
	c *chain
}

func (s validatingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := s.c.validate(m); err != nil {
		return errs.ToStatus(err).Err()
	}
	return nil
}

func (c *chain) validateStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, validatingStream{ss, c})
}

type requestIDKey struct{}

// requestID is the call's request id: the one requestLogger gave ctx, else
// the caller's (the gateway forwards its X-Request-Id, a program its
// caller's), else a new one.
func requestID(ctx context.Context) string {
	if id, ok := ctx.Value(requestIDKey{}).(string); ok {
		return id
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get(RequestIDHeader); len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// requestIDs are the fields that tie a line to its call: request_id and,
// when traced (the otelgrpc handler started the call's span), trace_id.
func requestIDs(ctx context.Context, id string) []zap.Field {
	fields := []zap.Field{zap.String("request_id", id)}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		fields = append(fields, zap.String("trace_id", sc.TraceID().String()))
	}
	return fields
}

// requestLogger returns the request-scoped logger: method, request id (from
// the caller or made here) and, when traced, the trace id. The returned
// context carries both, for the audit line.
func (c *chain) requestLogger(ctx context.Context, method string) (context.Context, *zap.Logger) {
	id := requestID(ctx)
	ctx = context.WithValue(ctx, requestIDKey{}, id)
	caller, peerID := Caller(ctx), Peer(ctx)
	fields := append([]zap.Field{zap.String("grpc.method", method)}, requestIDs(ctx, id)...)
	fields = append(fields,
		zap.String("caller", caller.Subject), zap.String("caller.role", caller.Role), zap.String("caller.scope", caller.Project),
		zap.String("peer", peerID.Subject), zap.String("peer.role", peerID.Role))
	l := c.log.With(fields...)
	return logging.With(ctx, l), l
}

// finish logs the outcome once, with any internal detail, and returns the
// clean status the caller sees.
func finish(l *zap.Logger, start time.Time, err error) error {
	st := errs.ToStatus(err)
	fields := []zap.Field{zap.Duration("duration", time.Since(start)), zap.String("grpc.code", st.Code().String())}
	switch st.Code() {
	case codes.OK:
		l.Info("request", fields...)
	case codes.Internal, codes.Unknown, codes.Unavailable, codes.DataLoss:
		l.Error("request failed", append(fields, zap.Error(err))...)
	default:
		l.Info("request", append(fields, zap.String("error", st.Message()))...)
	}
	return st.Err()
}

// audit writes the audit line of a call made directly over gRPC, by an
// operator's certificate rather than by a DCM program (whose calls act for
// a REST caller the gateway audited, or for the program itself): who
// (the certificate's CN and role), what, and the outcome, with the
// request's request_id and trace_id like its request lines. Refused calls
// are audited by callerAllowed's log line (its own ids: it comes before
// the request logger) and here.
func (c *chain) audit(ctx context.Context, method string, start time.Time, err error) {
	p := Peer(ctx)
	if p.Role == pki.RoleService {
		return
	}
	st := errs.ToStatus(err)
	c.log.Named(logging.AuditName).Info("grpc call", append([]zap.Field{
		zap.String("subject", p.Subject), zap.String("role", p.Role), zap.String("scope", p.Project), zap.String("auth", "certificate"),
		zap.String("grpc.method", method), zap.String("grpc.code", st.Code().String()), zap.Bool("ok", st.Code() == codes.OK),
		zap.String("remote", remoteOf(ctx)), zap.Duration("duration", time.Since(start))}, requestIDs(ctx, requestID(ctx))...)...)
}

func remoteOf(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

func (c *chain) logUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	ctx, l := c.requestLogger(ctx, info.FullMethod)
	resp, err := h(ctx, req)
	c.audit(ctx, info.FullMethod, start, err)
	if err = finish(l, start, err); err != nil {
		return nil, err
	}
	return resp, nil
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

func (c *chain) logStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	ctx, l := c.requestLogger(ss.Context(), info.FullMethod)
	err := h(srv, ctxStream{ss, ctx})
	c.audit(ctx, info.FullMethod, start, err)
	return finish(l, start, err)
}

func observe(method string, start time.Time, err error) {
	rpcTotal.WithLabelValues(method, status.Code(err).String()).Inc()
	rpcSeconds.WithLabelValues(method).Observe(time.Since(start).Seconds())
}

func (c *chain) metricsUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	observe(info.FullMethod, start, err)
	return resp, err
}

func (c *chain) metricsStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, ss)
	observe(info.FullMethod, start, err)
	return err
}

func mustValidator() protovalidate.Validator {
	v, err := protovalidate.New()
	if err != nil {
		panic(fmt.Sprintf("protovalidate: %v", err))
	}
	return v
}
