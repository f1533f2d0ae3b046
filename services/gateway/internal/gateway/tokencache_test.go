package gateway

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	authv1 "github.com/dcm-project/dcm/gen/dcm/auth/v1"
	"github.com/dcm-project/dcm/platform/pki"
)

// oneTokenService is a token service that knows one token and counts
// the questions it is asked.
type oneTokenService struct {
	authv1.AuthServiceClient
	known   string
	expires time.Time
	calls   int
}

func (c *oneTokenService) Authenticate(_ context.Context, in *authv1.AuthenticateRequest, _ ...grpc.CallOption) (*authv1.AuthenticateResponse, error) {
	c.calls++
	if in.GetToken() != c.known {
		return nil, status.Error(codes.Unauthenticated, "no")
	}
	return &authv1.AuthenticateResponse{Token: &authv1.Token{Subject: "alice", Role: pki.RoleProjectAdmin, Project: "p",
		ExpireTime: timestamppb.New(c.expires)}}, nil
}

// TestTokenCache: a verified token is asked about once per TTL, never
// past its own expiry; refused tokens are asked about every time (and
// count as failures); a revocation through the gateway drops it at once.
func TestTokenCache(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	tok := "dcm_0123456789abcdef_" + strings.Repeat("ab", 32)
	svc := &oneTokenService{known: tok, expires: now.Add(time.Hour)}
	a := &Authenticator{Tokens: svc, CacheTTL: 5 * time.Second}
	a.tokens().now = func() time.Time { return now }
	ask := func(tok string) (pki.Identity, error) {
		r := httptest.NewRequest("GET", "/v2/projects/p", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return a.Authenticate(r)
	}

	for range 3 {
		id, err := ask(tok)
		require.NoError(t, err)
		require.Equal(t, "alice", id.Subject)
	}
	require.Equal(t, 1, svc.calls, "asked once within the TTL")
	now = now.Add(5 * time.Second)
	_, err := ask(tok)
	require.NoError(t, err)
	require.Equal(t, 2, svc.calls, "asked again once the TTL has passed")

	a.Revoked(tokenID(tok))
	svc.known = ""
	_, err = ask(tok)
	require.ErrorIs(t, err, errUnauthenticated, "a revocation through the gateway takes effect at once")
	require.Equal(t, 3, svc.calls)

	bad := "dcm_0123456789abcdef_" + strings.Repeat("cd", 32)
	for range 2 {
		_, err = ask(bad)
		require.ErrorIs(t, err, errUnauthenticated)
	}
	require.Equal(t, 5, svc.calls, "refusals are never cached")

	svc.known, svc.expires = tok, now.Add(2*time.Second)
	_, err = ask(tok)
	require.NoError(t, err)
	now = now.Add(2 * time.Second)
	_, err = ask(tok)
	require.NoError(t, err)
	require.Equal(t, 7, svc.calls, "an entry never outlives its token's expiry")

	uncached := &Authenticator{Tokens: svc}
	for range 2 {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		_, err = uncached.Authenticate(r)
		require.NoError(t, err)
	}
	require.Equal(t, 9, svc.calls, "without CacheTTL every request asks")
}

func TestRevokedTokenID(t *testing.T) {
	t.Parallel()
	require.Equal(t, "0123456789abcdef", revokedTokenID("DELETE", "/v2/auth/tokens/0123456789abcdef", 204))
	require.Empty(t, revokedTokenID("DELETE", "/v2/auth/tokens/0123456789abcdef", 404))
	require.Empty(t, revokedTokenID("GET", "/v2/auth/tokens/0123456789abcdef", 200))
	require.Empty(t, revokedTokenID("DELETE", "/v2/projects/p", 204))
	require.Equal(t, "0123456789abcdef", tokenID("dcm_0123456789abcdef_"+strings.Repeat("ab", 32)))
}
