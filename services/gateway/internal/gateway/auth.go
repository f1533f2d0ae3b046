package gateway

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authv1 "github.com/dcm-project/dcm/gen/dcm/auth/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
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
}

// errUnauthenticated is every reason a credential is refused; the detail
// goes to the server log only.
var errUnauthenticated = errors.New("authentication required")

// Authenticate returns the caller's identity, errUnauthenticated (wrapped
// with the reason) or, when the token service cannot be reached, an
// Unavailable error.
func (a *Authenticator) Authenticate(r *http.Request) (pki.Identity, error) {
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
	return pki.Identity{Subject: t.GetSubject(), Role: t.GetRole(), Project: t.GetProject(), Method: "token"}, nil
}

// Authorize reports whether id may send method to path (the escaped path):
//   - admin: everything;
//   - project-admin: every method under its project's URLs, and GET on the
//     URLs outside any project (the cluster registry, CA roots, the API
//     document) so it can pick clusters;
//   - reader: GET only, under its project's URLs (or every project's, when
//     global) and outside any project.
//
// The project list and /v2/auth, /v2/admin are for admins (and global
// readers, for GET /v2/projects) only.
func Authorize(id pki.Identity, method, path string) bool {
	if id.Role == pki.RoleAdmin {
		return true
	}
	if id.Role != pki.RoleProjectAdmin && id.Role != pki.RoleReader {
		return false
	}
	segs := strings.Split(strings.Trim(path, "/"), "/")
	// A kubeconfig is a credential that writes to the clusters: reading one
	// takes what writing does.
	read := (method == http.MethodGet || method == http.MethodHead) && segs[len(segs)-1] != "kubeconfig"
	if len(segs) >= 2 && segs[0] == "v2" && (segs[1] == "auth" || segs[1] == "admin") {
		return false
	}
	project, scoped, isList := projectOf(segs)
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

var label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// projectOf finds the project a URL is under: /v2/projects/{p}/...,
// /v2/project/{p}/... (traffic's spelling) or /v1/cadist/projects/{p}/....
// isList is the project collection itself. A project segment that is not a
// name is treated as a project no one is scoped to.
func projectOf(segs []string) (project string, scoped, isList bool) {
	var rest []string
	switch {
	case len(segs) >= 2 && segs[0] == "v2" && (segs[1] == "projects" || segs[1] == "project"):
		rest = segs[2:]
	case len(segs) >= 3 && segs[0] == "v1" && segs[1] == "cadist" && segs[2] == "projects":
		rest = segs[3:]
	default:
		return "", false, false
	}
	if len(rest) == 0 || rest[0] == "" {
		return "", false, true
	}
	if !label.MatchString(rest[0]) {
		return "\x00", true, false
	}
	return rest[0], true, false
}

// audit is what one REST call leaves in the audit log; the mux fills in
// the route it matched.
type audit struct {
	route, rpc string
}

type auditKey struct{}

// secure authenticates and authorizes every request, strips the bearer
// token before it could travel on to a service, and writes an audit line
// for every mutating call (and every refused one).
func secure(auth *Authenticator, auditLog *zap.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &audit{}
		sw := &statusWriter{ResponseWriter: w}
		reqID := r.Header.Get(server.RequestIDHeader)
		if reqID == "" || len(reqID) > 64 {
			reqID = newRequestID()
			r.Header.Set(server.RequestIDHeader, reqID)
		}
		sw.Header().Set(server.RequestIDHeader, reqID)
		id, err := auth.Authenticate(r)
		result := "ok"
		switch {
		case errors.Is(err, errUnauthenticated):
			sw.Header().Set("WWW-Authenticate", `Bearer realm="dcm"`)
			errs.WriteHTTPStatus(sw, http.StatusUnauthorized, status.New(codes.Unauthenticated, "authentication required"))
			result = "unauthenticated"
		case err != nil:
			errs.WriteHTTP(sw, errs.ToStatus(err))
			result = "error"
		case !Authorize(id, r.Method, r.URL.EscapedPath()):
			errs.WriteHTTPStatus(sw, http.StatusForbidden, status.New(codes.PermissionDenied, "your role does not allow this request"))
			result = "forbidden"
		default:
			r.Header.Del("Authorization")
			next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), auditKey{}, rec)))
			if sw.code >= 400 {
				result = "error"
			}
		}
		refused := result == "unauthenticated" || result == "forbidden"
		if !refused && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			return
		}
		reason := zap.Skip()
		if refused && err != nil {
			reason = zap.NamedError("reason", err) // why a credential was refused: for operators only
		}
		auditLog.Info("rest call", reason,
			zap.String("subject", id.Subject), zap.String("role", id.Role), zap.String("scope", id.Project), zap.String("auth", id.Method),
			zap.String("http.method", r.Method), zap.String("object", r.URL.Path), zap.String("route", rec.route), zap.String("rpc", rec.rpc),
			zap.Int("status", sw.status()), zap.String("result", result),
			zap.String("request_id", reqID), zap.String("remote", r.RemoteAddr),
			zap.Duration("duration", time.Since(start)))
	})
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
