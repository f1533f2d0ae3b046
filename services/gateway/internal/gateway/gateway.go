// Package gateway translates the documented REST URLs into gRPC calls to the
// services (grpc-gateway v2), with the API's JSON keys, status codes and
// error bodies. It holds no state and no business rules.
package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/textproto"
	"regexp"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/api/annotations"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	authv1 "github.com/dcm-project/dcm/gen/dcm/auth/v1"
	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	keysv1 "github.com/dcm-project/dcm/gen/dcm/keys/v1"
	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/gateway/internal/openapi"
)

// Conns are the gRPC connections to the services the gateway routes to.
type Conns struct {
	Core, Namespace, User, Quota, Rsync, CADist, ServiceMesh, Traffic *grpc.ClientConn
	// Stores are one connection per distinct program with a store: key
	// rotation goes to each.
	Stores []*grpc.ClientConn
}

// New returns the REST handler: every request authenticated by auth,
// routed, then authorized by role on the route it matched (see
// Authorize), and audited on auditLog (see secure).
func New(ctx context.Context, conns Conns, auth *Authenticator, auditLog *zap.Logger, limits Limits) (http.Handler, error) {
	mux := runtime.NewServeMux(
		// HTTPBodyMarshaler writes google.api.HttpBody answers (the
		// kubeconfig, application/yaml) as they are; everything else is JSON.
		// lenientJSON reads the traffic controller's bodies in seed 004's
		// shapes too (lenient.go).
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.HTTPBodyMarshaler{Marshaler: &lenientJSON{JSONPb: &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: true},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
		}}}),
		runtime.WithErrorHandler(writeError),
		runtime.WithRoutingErrorHandler(routingError),
		runtime.WithForwardResponseOption(setStatus),
		runtime.WithForwardResponseOption(pageHeader),
		// Answers to EMCO's dialect in EMCO's shapes (emco.go).
		runtime.WithForwardResponseRewriter(inEMCO),
		runtime.WithIncomingHeaderMatcher(headerMatcher),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithMetadata(noteRoute),
		// authorized before readBody: no body is read for a caller the
		// route refuses.
		runtime.WithMiddlewares(authorized, readBody),
		// One method per request: no POST standing in for a GET.
		runtime.WithDisablePathLengthFallback(),
		runtime.WithDisableHTTPMethodOverride(),
	)
	keys := make(fanOut, 0, len(conns.Stores))
	for _, c := range conns.Stores {
		keys = append(keys, keysv1.NewKeyServiceClient(c))
	}
	for name, register := range map[string]func() error{
		"core":           func() error { return corev1.RegisterCoreServiceHandler(ctx, mux, conns.Core) },
		"logical clouds": func() error { return corev1.RegisterLogicalCloudServiceHandler(ctx, mux, conns.Core) },
		"auth":           func() error { return authv1.RegisterAuthServiceHandler(ctx, mux, conns.Core) },
		"namespace":      func() error { return namespacev1.RegisterNamespaceServiceHandler(ctx, mux, conns.Namespace) },
		"user":           func() error { return userv1.RegisterUserServiceHandler(ctx, mux, conns.User) },
		"quota":          func() error { return quotav1.RegisterQuotaServiceHandler(ctx, mux, conns.Quota) },
		"rsync":          func() error { return rsyncv1.RegisterRsyncServiceHandler(ctx, mux, conns.Rsync) },
		"cadist":         func() error { return cadistv1.RegisterCaDistServiceHandler(ctx, mux, conns.CADist) },
		"keys":           func() error { return keysv1.RegisterKeyServiceHandlerClient(ctx, mux, keys) },
		"traffic":        func() error { return trafficv1.RegisterTrafficServiceHandler(ctx, mux, conns.Traffic) },
		// Core serves a traffic intent group's apply, update, terminate and status.
		"traffic lifecycle": func() error { return corev1.RegisterTrafficLifecycleServiceHandler(ctx, mux, conns.Core) },
		"service mesh": func() error {
			return servicemeshv1.RegisterServiceMeshServiceHandler(ctx, mux, conns.ServiceMesh)
		},
	} {
		if err := register(); err != nil {
			return nil, fmt.Errorf("register %s routes: %w", name, err)
		}
	}
	doc, err := openapi.Build(successStatus, app.Version())
	if err != nil {
		return nil, fmt.Errorf("OpenAPI document: %w", err)
	}
	if routesErr != nil {
		return nil, fmt.Errorf("routes of the EMCO dialect: %w", routesErr)
	}
	root := http.NewServeMux()
	if limits.Dialect == "" {
		limits.Dialect = DialectDCM
	}
	if err := CheckDialect(limits.Dialect); err != nil {
		return nil, err
	}
	root.Handle("/", aliases(watchParam(limits, multipartClusters(dialects(limits.Dialect, noBodyOn204(mux))))))
	// The API document and its page hold no data: they are served before
	// authentication, to anyone (no credential is looked at, so none fails
	// and the failed-authentication limiter never counts them).
	public := http.NewServeMux()
	public.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(doc)
	})
	public.Handle("GET "+openapi.DocsPath, openapi.Docs)
	public.Handle("GET "+openapi.DocsPath+"/{file}", openapi.Docs)
	// The REST call starts the trace its gRPC calls carry on
	// (platform/telemetry), once the caller is authenticated (secure).
	public.Handle("/", secure(auth, auditLog, root))
	return public, nil
}

// noteRoute records the matched route and RPC for the audit log, and
// tells the service who the caller is (platform/server.Caller).
func noteRoute(ctx context.Context, r *http.Request) metadata.MD {
	a := auditOf(r.Context())
	a.route, _ = runtime.HTTPPathPattern(ctx)
	a.rpc, _ = runtime.RPCMethod(ctx)
	return server.CallerMD(a.id)
}

// fanOut sends key rotation to every program with a store and adds up
// their answers; the first failure fails the call (a rewrap can be rerun).
type fanOut []keysv1.KeyServiceClient

func (f fanOut) RewrapSecrets(ctx context.Context, in *keysv1.RewrapSecretsRequest, opts ...grpc.CallOption) (*keysv1.RewrapSecretsResponse, error) {
	sum := &keysv1.RewrapSecretsResponse{}
	for _, c := range f {
		r, err := c.RewrapSecrets(ctx, in, opts...)
		if err != nil {
			return nil, err
		}
		if sum.KeyId != "" && r.GetKeyId() != sum.KeyId {
			return nil, errs.FailedPrecondition("the services' keyrings disagree on the current key (%q, %q): give them all the same keyring", sum.KeyId, r.GetKeyId())
		}
		sum.KeyId = r.GetKeyId()
		sum.Records += r.GetRecords()
		sum.Values += r.GetValues()
		sum.Unchanged += r.GetUnchanged()
	}
	return sum, nil
}

// writeError is the gateway's one error path: the status from the service
// (or from decoding the request) becomes errs' HTTP status and JSON body.
func writeError(ctx context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
	st := errs.ToStatus(err)
	field := errs.FieldOf(st)
	if st.Code() == codes.InvalidArgument && field == "" {
		st = decodeError(ctx, st.Message())
	}
	if field != "" {
		for _, body := range bodyField(ctx) {
			if strings.HasPrefix(field, body+".") {
				rel := strings.TrimPrefix(field, body+".")
				msg := strings.TrimPrefix(st.Message(), field+": ")
				if st.Code() == codes.PermissionDenied {
					st = errs.ToStatus(errs.Forbidden(rel, "%s", msg))
				} else {
					st = errs.ToStatus(errs.Invalid(rel, "%s", msg))
				}
				break
			}
		}
	}
	if sp := dialectOf(ctx); sp.dialect == DialectEMCO && sp.kind != "" {
		if f := errs.FieldOf(st); f != "" {
			if to := emcoField(sp.kind, f); to != f {
				st = errs.ToStatus(errs.Invalid(to, "%s", strings.TrimPrefix(st.Message(), f+": ")))
			}
		}
	}
	errs.WriteHTTP(w, st)
}

// bodyField is the request field the route's body maps to, by its proto
// and its JSON name (none for "*"): services name fields from the request
// message (cluster.spec.kubeconfig, user-permission.verbs), REST callers
// from the body they sent (spec.kubeconfig, verbs).
func bodyField(ctx context.Context) []string {
	method, ok := runtime.RPCMethod(ctx)
	if !ok {
		return nil
	}
	name := protoreflect.FullName(strings.ReplaceAll(strings.TrimPrefix(method, "/"), "/", "."))
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
	if err != nil {
		return nil
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return nil
	}
	rule, ok := proto.GetExtension(md.Options(), annotations.E_Http).(*annotations.HttpRule)
	if !ok || rule.GetBody() == "*" || rule.GetBody() == "" {
		return nil
	}
	names := []string{rule.GetBody()}
	if fd := md.Input().Fields().ByName(protoreflect.Name(rule.GetBody())); fd != nil {
		names = append(names, fd.JSONName())
	}
	return names
}

// Services name the field of every InvalidArgument they return, so one
// without a field comes from decoding the request here: malformed JSON, an
// unknown field, a value of the wrong type or a bad path parameter.
// protojson names the field in its message; we lift it into the body.
var decodeField = []*regexp.Regexp{
	regexp.MustCompile(`unknown field "([^"]+)"`),
	regexp.MustCompile(`invalid value for [a-z0-9 ]*field ([A-Za-z0-9_-]+)`),
	regexp.MustCompile(`parsing field "([^"]+)"`),
	regexp.MustCompile(`too many values for field "([^"]+)"`),
}

var protoPrefix = regexp.MustCompile(`^proto: (\(line \d+:\d+\): )?`)

func decodeError(ctx context.Context, msg string) *status.Status {
	field := "body"
	for _, re := range decodeField {
		if m := re.FindStringSubmatch(msg); m != nil {
			field = jsonFieldName(ctx, m[1])
			break
		}
	}
	msg = strings.TrimSpace(protoPrefix.ReplaceAllString(msg, ""))
	return errs.ToStatus(errs.Invalid(field, "invalid request: %s", msg))
}

// routingError answers URLs and methods that no route serves; a URL of
// one of EMCO's other controllers with what DCM does instead (Elsewhere).
func routingError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, code int) {
	if e, ok := elsewhere(r.URL.Path); ok {
		answerElsewhere(w, e)
		return
	}
	c := codes.NotFound
	if code == http.StatusMethodNotAllowed {
		c = codes.Unimplemented
	}
	errs.WriteHTTPStatus(w, code, status.New(c, "no route for "+r.Method+" "+sentPath(r)))
}

// asyncVerbs start work that goes on after the answer: apply
// (instantiate), update, stop, terminate, and a staged rollout's resume and
// rollback.
var asyncVerbs = regexp.MustCompile(`^(Apply|Stop|Terminate|Resume|Rollback)[A-Za-z]+$|^Update[A-Za-z]+Resources$`)

// successStatus is the status a successful call of rpc (a method name, or
// a full /package.Service/Method) answers: 201 for Create* calls, 204 for
// Delete* calls and 202 Accepted for the asynchronous verbs (their body is
// the status as the call left it: read .../status for the rest); every
// other call answers 200. setStatus writes it, and the OpenAPI document
// declares it (openapi.Build), so the two cannot differ.
func successStatus(rpc string) int {
	name := rpc[strings.LastIndex(rpc, "/")+1:]
	switch {
	case asyncVerbs.MatchString(name):
		return http.StatusAccepted
	case strings.HasPrefix(name, "Create"):
		return http.StatusCreated
	case strings.HasPrefix(name, "Delete"):
		return http.StatusNoContent
	}
	return http.StatusOK
}

// setStatus writes the call's successStatus, as the API documents.
func setStatus(ctx context.Context, w http.ResponseWriter, _ proto.Message) error {
	method, ok := runtime.RPCMethod(ctx)
	if !ok {
		return nil
	}
	if code := successStatus(method); code != http.StatusOK {
		w.WriteHeader(code)
	}
	return nil
}

// headerMatcher forwards the request id besides grpc-gateway's permanent
// HTTP headers, and never a client's Grpc-Metadata-* header: a client
// must not set gRPC metadata, least of all the caller identity the
// gateway forwards.
func headerMatcher(key string) (string, bool) {
	if strings.EqualFold(key, server.RequestIDHeader) {
		return server.RequestIDHeader, true
	}
	if strings.HasPrefix(textproto.CanonicalMIMEHeaderKey(key), runtime.MetadataHeaderPrefix) {
		return "", false
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

// status is the code written, 200 if none was.
func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (the write
// deadline of watch streams).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
