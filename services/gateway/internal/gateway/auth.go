package gateway

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"go.opentelemetry.io/otel"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authv1 "github.com/dcm-project/dcm/gen/dcm/auth/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/telemetry"
)

// Authenticator finds out who sent a REST request: a bearer token (the
// bootstrap admin token, or one the token service issued) or, without
// one, a client certificate of the CA bundle.
type Authenticator struct {
	// TLS verifies client certificates; nil accepts none (plain HTTP).
	TLS *pki.TLS
	// AdminToken is the bootstrap admin token; empty accepts none.
	AdminToken string
	// Tokens checks issued tokens.
	Tokens authv1.AuthServiceClient
	// Failures limits failed authentications per client address (nil:
	// no limit). A limited address is refused whatever it presents: the
	// admin token and client certificates too, which are checked without
	// a store read but would otherwise let a flood through the same door.
	Failures *FailureLimiter
	// CacheTTL is how long a verified issued token is trusted without
	// asking the token service again (0: ask on every request); see
	// TokenCacheTTL.
	CacheTTL time.Duration

	cacheOnce sync.Once
	cache     *tokenCache
}

// tokens is the cache of verified tokens (nil without CacheTTL).
func (a *Authenticator) tokens() *tokenCache {
	a.cacheOnce.Do(func() {
		if a.CacheTTL > 0 {
			a.cache = newTokenCache(a.CacheTTL)
		}
	})
	return a.cache
}

// Revoked drops what the cache holds of the token with public id id: a
// revocation through this gateway takes effect at once.
func (a *Authenticator) Revoked(id string) { a.tokens().forget(id) }

// errUnauthenticated is every reason a credential is refused; the detail
// goes to the server log only.
var errUnauthenticated = errors.New("authentication required")

// Authenticate returns the caller's identity, errUnauthenticated (wrapped
// with the reason), a *refusal when the client's address has failed too
// often (checked first: no credential is looked at, no store read) or,
// when the token service cannot be reached, an Unavailable error.
func (a *Authenticator) Authenticate(r *http.Request) (pki.Identity, error) {
	key := clientKey(r.RemoteAddr)
	if ref := a.Failures.allow(key); ref != nil {
		return pki.Identity{}, ref
	}
	id, err := a.authenticate(r)
	if errors.Is(err, errUnauthenticated) {
		a.Failures.fail(key)
	}
	return id, err
}

func (a *Authenticator) authenticate(r *http.Request) (pki.Identity, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return pki.Identity{}, errors.Join(errUnauthenticated, errors.New("authorization header is not a bearer token"))
		}
		return a.token(r.Context(), strings.TrimSpace(tok))
	}
	if a.TLS != nil && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		id, err := a.TLS.VerifyClient(r.TLS.PeerCertificates)
		if err != nil {
			return pki.Identity{}, errors.Join(errUnauthenticated, err)
		}
		return id, nil
	}
	return pki.Identity{}, errors.Join(errUnauthenticated, errors.New("no credentials"))
}

func (a *Authenticator) token(ctx context.Context, tok string) (pki.Identity, error) {
	if strings.HasPrefix(tok, pki.AdminTokenPrefix) {
		if a.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(a.AdminToken)) == 1 {
			return pki.Identity{Subject: "admin", Role: pki.RoleAdmin, Method: "token"}, nil
		}
		return pki.Identity{}, errors.Join(errUnauthenticated, errors.New("wrong admin token"))
	}
	if id, ok := a.tokens().get(tok); ok {
		return id, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := a.Tokens.Authenticate(ctx, &authv1.AuthenticateRequest{Token: tok})
	if status.Code(err) == codes.Unauthenticated || status.Code(err) == codes.InvalidArgument {
		return pki.Identity{}, errors.Join(errUnauthenticated, errors.New("token refused by the token service"))
	}
	if err != nil {
		return pki.Identity{}, errs.Unavailable(err, "cannot check the token now, retry later")
	}
	t := resp.GetToken()
	id := pki.Identity{Subject: t.GetSubject(), Role: t.GetRole(), Project: t.GetProject(), Method: "token"}
	a.tokens().put(tok, id, t.GetExpireTime().AsTime())
	return id, nil
}

// Route is what the router matched for a request: the route's template,
// split into segments ("projects", or "{project}" for a variable), and
// the decoded values of its variables. Authorization works on it, never
// on the URL as sent, so no spelling of a URL (percent-encoded letters,
// mixed-case hex) can reach a route that Authorize did not see.
type Route struct {
	Segments []string
	Params   map[string]string
}

// routeOf reads the template grpc-gateway matched ("/v2/projects/{project=*}")
// into a Route.
func routeOf(template string, params map[string]string) Route {
	segs := strings.Split(strings.Trim(template, "/"), "/")
	for i, s := range segs {
		if v, ok := strings.CutPrefix(s, "{"); ok {
			name, _, _ := strings.Cut(strings.TrimSuffix(v, "}"), "=")
			segs[i] = "{" + name + "}"
		}
	}
	return Route{Segments: segs, Params: params}
}

func (r Route) literal(i int) string {
	if i < 0 || i >= len(r.Segments) || strings.HasPrefix(r.Segments[i], "{") {
		return ""
	}
	return r.Segments[i]
}

// Credential reports whether the route hands out a credential (a
// kubeconfig, or tokens): reading one takes what writing does, and every
// read is audited.
func (r Route) Credential() bool {
	return r.literal(len(r.Segments)-1) == "kubeconfig" || (r.literal(0) == "v2" && r.literal(1) == "auth")
}

// project finds the project a route is under: /v2/projects/{p}/...,
// /v2/project/{p}/... (traffic's spelling) or /v1/cadist/projects/{p}/....
// isList is the project collection itself.
func (r Route) project() (project string, scoped, isList bool) {
	var at int
	switch {
	case r.literal(0) == "v2" && (r.literal(1) == "projects" || r.literal(1) == "project"):
		at = 2
	case r.literal(0) == "v1" && r.literal(1) == "cadist" && r.literal(2) == "projects":
		at = 3
	default:
		return "", false, false
	}
	if at >= len(r.Segments) {
		return "", false, true
	}
	v, ok := strings.CutPrefix(r.Segments[at], "{")
	if !ok {
		return "\x00", true, false // a literal where a project goes: no one is scoped to it
	}
	return r.Params[strings.TrimSuffix(v, "}")], true, false
}

// Authorize reports whether id may send method to the matched route:
//   - admin: everything;
//   - project-admin: every method under its project's URLs, and GET on the
//     URLs outside any project (the cluster registry, CA roots) so it can
//     pick clusters;
//   - reader: GET only, under its project's URLs (or every project's, when
//     global) and outside any project.
//
// The project list and /v2/auth, /v2/admin are for admins (and global
// readers, for GET /v2/projects) only. A kubeconfig takes write access.
// What a project-admin may grant inside its project (levels, permissions
// outside the namespace, quotas over the maximum) is decided by the
// services, which see the caller (platform/server.Caller).
func Authorize(id pki.Identity, method string, r Route) bool {
	if id.Role == pki.RoleAdmin {
		return true
	}
	if id.Role != pki.RoleProjectAdmin && id.Role != pki.RoleReader {
		return false
	}
	read := (method == http.MethodGet || method == http.MethodHead) && !r.Credential()
	if r.literal(0) == "v2" && (r.literal(1) == "auth" || r.literal(1) == "admin") {
		return false
	}
	project, scoped, isList := r.project()
	switch {
	case isList:
		return read && id.Role == pki.RoleReader && id.Project == ""
	case id.Role == pki.RoleProjectAdmin:
		if scoped {
			return project == id.Project
		}
		return read
	default: // reader
		return read && (!scoped || id.Project == "" || project == id.Project)
	}
}

// audit is what one REST call leaves in the audit log; the router fills
// in the route it matched, and the authorizer what it decided.
type audit struct {
	id         pki.Identity
	route, rpc string
	credential bool
	forbidden  bool
}

type auditKey struct{}

func auditOf(ctx context.Context) *audit {
	a, _ := ctx.Value(auditKey{}).(*audit)
	if a == nil {
		return &audit{}
	}
	return a
}

// authorized is the router's middleware: it runs once a route matched,
// with the route's template and decoded path parameters, and refuses
// what the caller's role does not allow (403).
func authorized(next runtime.HandlerFunc) runtime.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, params map[string]string) {
		a := auditOf(r.Context())
		pat, ok := runtime.HTTPPattern(r.Context())
		if !ok {
			forbid(w, a)
			return
		}
		rt := routeOf(pat.String(), params)
		a.route, a.credential = pat.String(), rt.Credential()
		if !Authorize(a.id, r.Method, rt) {
			forbid(w, a)
			return
		}
		next(w, r, params)
	}
}

func forbid(w http.ResponseWriter, a *audit) {
	a.forbidden = true
	errs.WriteHTTPStatus(w, http.StatusForbidden, status.New(codes.PermissionDenied, "your role does not allow this request"))
}

// encodedSlash finds a percent-encoded "/" in a path: the router would
// split on it once decoded, so a segment could hide a path in it.
var encodedSlash = regexp.MustCompile(`(?i)%2f`)

// secure authenticates every request, refuses an encoded "/" (400),
// strips the bearer token before it could travel on to a service, and
// writes an audit line for every mutating call, every credential read and
// every refused or failed one, with the path as sent. Authorization
// happens after routing (authorized).
//
// The REST call's trace span (platform/telemetry) starts after
// authentication: a client that is not authenticated (or is refused for
// too many failures) does not choose the trace id its audit line and the
// server's spans carry: its traceparent, tracestate and baggage headers
// are dropped and the gateway starts a trace of its own. An authenticated
// caller's traceparent is honoured: the REST span is a child of its span,
// and its trace id is the audit line's trace_id (docs/observability.md).
func secure(auth *Authenticator, auditLog *zap.Logger, next http.Handler) http.Handler {
	traced := telemetry.HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(authnKey{}).(authn)
		serveAuthenticated(auth, auditLog, next, c, w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id, err := auth.Authenticate(r)
		if err != nil {
			for _, h := range otel.GetTextMapPropagator().Fields() {
				r.Header.Del(h)
			}
		}
		traced.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), authnKey{}, authn{id: id, err: err, start: start})))
	})
}

// authn is what secure's authentication found, for the traced rest of the call.
type authn struct {
	id    pki.Identity
	err   error
	start time.Time
}

type authnKey struct{}

// serveAuthenticated is the rest of secure, inside the call's span.
func serveAuthenticated(auth *Authenticator, auditLog *zap.Logger, next http.Handler, c authn, w http.ResponseWriter, r *http.Request) {
	start, id, err := c.start, c.id, c.err
	rec := &audit{}
	sw := &statusWriter{ResponseWriter: w}
	defer func() { observeREST(r, rec.route, sw.status(), start) }()
	reqID := r.Header.Get(server.RequestIDHeader)
	if reqID == "" || len(reqID) > 64 {
		reqID = newRequestID()
		r.Header.Set(server.RequestIDHeader, reqID)
	}
	sw.Header().Set(server.RequestIDHeader, reqID)
	rec.id = id
	result := "ok"
	var limited *refusal
	switch {
	case errors.As(err, &limited):
		sw.Header().Set("Retry-After", strconv.Itoa(retrySeconds(limited.retryAfter)))
		errs.WriteHTTPStatus(sw, http.StatusTooManyRequests, status.New(codes.ResourceExhausted,
			limited.Error()+" (DCM_AUTH_FAILURE_BURST)"))
		if !limited.summarize {
			return // one audit line per address per minute sums these up
		}
		result = "rate-limited"
	case errors.Is(err, errUnauthenticated):
		sw.Header().Set("WWW-Authenticate", `Bearer realm="dcm"`)
		errs.WriteHTTPStatus(sw, http.StatusUnauthorized, status.New(codes.Unauthenticated, "authentication required"))
		result = "unauthenticated"
	case err != nil:
		errs.WriteHTTP(sw, errs.ToStatus(err))
		result = "error"
	case encodedSlash.MatchString(r.URL.EscapedPath()):
		errs.WriteHTTP(sw, errs.ToStatus(errs.Invalid("path", "a path segment may not contain an encoded '/' (%%2F)")))
		result = "refused"
	default:
		r.Header.Del("Authorization")
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), auditKey{}, rec)))
		if tid := revokedTokenID(r.Method, r.URL.Path, sw.status()); tid != "" {
			auth.Revoked(tid)
		}
		switch {
		case rec.forbidden:
			result = "forbidden"
		case sw.code >= 400:
			result = "error"
		}
	}
	refused := result == "unauthenticated" || result == "forbidden" || result == "refused" || result == "rate-limited"
	if !refused && sw.status() < 400 && !rec.credential && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		return
	}
	reason, summary := zap.Skip(), zap.Skip()
	if refused && err != nil {
		reason = zap.NamedError("reason", err) // why a credential was refused: for operators only
	}
	if limited != nil {
		summary = zap.Int("refused", limited.count) // 429s to this address since its last such line
	}
	auditLog.Info("rest call", reason, summary, traceField(r.Context()),
		zap.String("subject", id.Subject), zap.String("role", id.Role), zap.String("scope", id.Project), zap.String("auth", id.Method),
		zap.String("http.method", r.Method), zap.String("object", r.URL.Path), zap.String("raw_path", r.URL.EscapedPath()),
		zap.String("route", rec.route), zap.String("rpc", rec.rpc), zap.Bool("credential", rec.credential),
		zap.Int("status", sw.status()), zap.String("result", result),
		zap.String("request_id", reqID), zap.String("remote", r.RemoteAddr),
		zap.Duration("duration", time.Since(start)))
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
