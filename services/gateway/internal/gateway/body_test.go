package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	authv1 "github.com/dcm-project/dcm/gen/dcm/auth/v1"
	"github.com/dcm-project/dcm/platform/pki"
)

// tokenService answers Authenticate from a fixed table: the token
// service's answer is not what these tests are about.
type tokenService struct {
	authv1.AuthServiceClient
	tokens map[string]pki.Identity
}

func (s tokenService) Authenticate(_ context.Context, in *authv1.AuthenticateRequest, _ ...grpc.CallOption) (*authv1.AuthenticateResponse, error) {
	id, ok := s.tokens[in.GetToken()]
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "unknown token")
	}
	return &authv1.AuthenticateResponse{Token: &authv1.Token{Subject: id.Subject, Role: id.Role, Project: id.Project}}, nil
}

// countedBody is a body of size bytes, made as it is read, that counts
// what was read of it.
type countedBody struct {
	prefix string
	left   int64
	read   atomic.Int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	if b.prefix != "" {
		n := copy(p, b.prefix)
		b.prefix = b.prefix[n:]
		b.read.Add(int64(n))
		return n, nil
	}
	if b.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), b.left)
	for i := range p[:n] {
		p[i] = ' '
	}
	b.left -= n
	b.read.Add(n)
	return int(n), nil
}

// testGateway is the gateway's REST handler with services that cannot be
// reached (a call that gets that far fails with 503) and three tokens.
func testGateway(t *testing.T, auditLog *zap.Logger) http.Handler {
	t.Helper()
	conn, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	auth := &Authenticator{AdminToken: pki.AdminTokenPrefix + "x", Tokens: tokenService{tokens: map[string]pki.Identity{
		"reader-a": {Subject: "r", Role: pki.RoleReader, Project: "a"},
		"pa-b":     {Subject: "p", Role: pki.RoleProjectAdmin, Project: "b"},
		"pa-a":     {Subject: "p", Role: pki.RoleProjectAdmin, Project: "a"},
	}}}
	h, err := New(context.Background(), Conns{Core: conn, Namespace: conn, User: conn, Quota: conn, Rsync: conn,
		CADist: conn, ServiceMesh: conn, Traffic: conn, Stores: []*grpc.ClientConn{conn}}, auth, auditLog, Limits{})
	require.NoError(t, err)
	return h
}

// TestNoBodyReadBeforeAuthorization: the gateway reads nothing of a
// request's body until the caller is authenticated and the route it
// matched allows the caller: a client without a credential gets 401, a
// role the route refuses 403, with no byte of the body read (an EMCO
// logical cloud, whose body the dialect rewrite reads, and a plain one);
// an allowed caller's body is read whole. Before, the dialect rewrite read
// an authenticated caller's body before the route's authorization, and
// the HTTP server (platform/server) every chunked body up to the cap
// before anyone was authenticated (TestBodyNotReadBeforeHandler there).
func TestNoBodyReadBeforeAuthorization(t *testing.T) {
	t.Parallel()
	h := testGateway(t, zap.NewNop())
	const size = 8 << 20
	emco := `{"metadata":{"name":"lc1"},"spec":{"user":{"userName":"u"}}}`
	for _, c := range []struct {
		name, token, path string
		code              int
		read              bool
	}{
		{"no credential", "", "/v2/projects/a/logical-clouds", 401, false},
		{"a wrong token", "nope", "/v2/projects/a/logical-clouds", 401, false},
		{"a reader, EMCO route", "reader-a", "/v2/projects/a/logical-clouds", 403, false},
		{"another project's admin, EMCO route", "pa-b", "/v2/projects/a/logical-clouds", 403, false},
		{"another project's admin, plain route", "pa-b", "/v2/projects/a/logical-clouds/lc1/cluster-quotas", 403, false},
		{"a project-admin, an admin's route", "pa-a", "/v2/cluster-providers", 403, false},
		{"the project's admin", "pa-a", "/v2/projects/a/logical-clouds", 503, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := &countedBody{prefix: emco, left: size}
			req := httptest.NewRequest("POST", c.path, io.NopCloser(body))
			req.ContentLength = -1
			req.Header.Set("Content-Type", "application/json")
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			require.Equal(t, c.code, w.Code, "%s", w.Body)
			if c.read {
				require.Equal(t, int64(len(emco)+size), body.read.Load(), "an allowed caller's body is read whole")
				return
			}
			require.Zero(t, body.read.Load(), "bytes of the body read before the caller was allowed")
			require.True(t, strings.Contains(w.Body.String(), `"code":`), "%s", w.Body)
		})
	}
}
