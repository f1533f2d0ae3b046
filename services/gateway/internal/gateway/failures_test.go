package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	authv1 "github.com/dcm-project/dcm/gen/dcm/auth/v1"
	"github.com/dcm-project/dcm/platform/pki"
)

// countingTokens is the token service as the gateway sees it: one token
// is good, every other is refused; it counts the look-ups (store reads).
type countingTokens struct {
	authv1.AuthServiceClient
	calls atomic.Int64
}

const goodToken = "dcm_0123456789abcdef_good"

func (c *countingTokens) Authenticate(_ context.Context, in *authv1.AuthenticateRequest, _ ...grpc.CallOption) (*authv1.AuthenticateResponse, error) {
	c.calls.Add(1)
	if in.GetToken() != goodToken {
		return nil, status.Error(codes.Unauthenticated, "unknown token")
	}
	return &authv1.AuthenticateResponse{Token: &authv1.Token{Subject: "alice", Role: pki.RoleAdmin}}, nil
}

func TestClientKey(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"192.0.2.7:4711":           "192.0.2.7",
		"192.0.2.7:1":              "192.0.2.7",
		"[::ffff:192.0.2.7]:80":    "192.0.2.7",
		"[2001:db8:1:2::1]:443":    "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::9]:1": "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:443":    "2001:db8:1:3::/64",
		"[fe80::1%eth0]:22":        "fe80::/64",
		"not an address":           "not an address",
	} {
		require.Equal(t, want, clientKey(addr), addr)
	}
}

// TestFailureLimiter: burst failures, then refusals with the time to the
// next regained failure; one refusal per minute is summarized.
func TestFailureLimiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	l := NewFailureLimiter(3, 2*time.Second)
	l.now = func() time.Time { return now }
	require.Nil(t, NewFailureLimiter(0, time.Second), "burst 0: no limit")
	require.Nil(t, (*FailureLimiter)(nil).allow("a"), "a nil limiter limits nothing")

	for range 3 {
		require.Nil(t, l.allow("a"))
		l.fail("a")
	}
	r := l.allow("a")
	require.NotNil(t, r, "burst spent")
	require.Equal(t, 2*time.Second, r.retryAfter)
	require.True(t, r.summarize, "the first refusal is audited")
	require.Equal(t, 1, r.count)
	for range 5 {
		r = l.allow("a")
		require.NotNil(t, r)
		require.False(t, r.summarize, "the next ones are summed up later")
	}
	require.Nil(t, l.allow("b"), "another address is not limited")

	now = now.Add(time.Second)
	r = l.allow("a")
	require.NotNil(t, r)
	require.Equal(t, time.Second, r.retryAfter)
	now = now.Add(time.Second)
	require.Nil(t, l.allow("a"), "one failure regained")
	l.fail("a")
	now = now.Add(time.Minute)
	for range 3 {
		require.Nil(t, l.allow("a"), "refilled to the burst, not past it")
		l.fail("a")
	}
	r = l.allow("a")
	require.NotNil(t, r)
	require.True(t, r.summarize, "a minute on: audited again")
	require.Equal(t, 7, r.count, "with every refusal since the last line")
}

// TestFailureLimiterBounded: however many addresses fail, the limiter
// keeps at most its maximum, forgetting the least recently seen.
func TestFailureLimiterBounded(t *testing.T) {
	t.Parallel()
	l := NewFailureLimiter(1, time.Hour)
	l.max = 100
	for i := range 10_000 {
		l.fail(fmt.Sprintf("10.0.%d.%d", i/256, i%256))
	}
	require.Equal(t, 100, l.tracked())
	require.Len(t, l.addrs, 100)
	require.NotNil(t, l.allow("10.0.39.15"), "the most recent addresses are kept (10.0.39.15 is the last)")
	require.Nil(t, l.allow("10.0.0.0"), "the oldest are forgotten")
}

// TestAuthFailuresRateLimited goes through secure: bad tokens are 401
// until the address's burst is spent, then 429 with Retry-After without
// a token look-up, whatever the request presents (the admin token too);
// good credentials from another address pass; the refusals leave one
// audit line, not one each.
func TestAuthFailuresRateLimited(t *testing.T) {
	t.Parallel()
	tokens := &countingTokens{}
	admin := pki.AdminTokenPrefix + "secret"
	auth := &Authenticator{AdminToken: admin, Tokens: tokens, Failures: NewFailureLimiter(5, time.Hour)}
	core, logs := observer.New(zap.InfoLevel)
	var served atomic.Int64
	h := secure(auth, zap.New(core), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	do := func(remote, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/v2/projects", nil)
		req.RemoteAddr = remote
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}

	for i := range 5 {
		w := do(fmt.Sprintf("198.51.100.9:%d", 1000+i), fmt.Sprintf("dcm_%016d_bogus", i))
		require.Equal(t, 401, w.Code, "failure %d", i)
	}
	require.EqualValues(t, 5, tokens.calls.Load())
	for i := range 20 {
		w := do(fmt.Sprintf("198.51.100.9:%d", 2000+i), fmt.Sprintf("dcm_%016d_bogus", i))
		require.Equal(t, 429, w.Code)
		require.Equal(t, "3600", w.Header().Get("Retry-After"))
		require.Contains(t, w.Body.String(), `"status":"ResourceExhausted"`)
		require.Contains(t, w.Body.String(), "too many failed authentications from your address")
	}
	require.EqualValues(t, 5, tokens.calls.Load(), "no token look-up for a limited address")
	require.Equal(t, 429, do("198.51.100.9:3000", admin).Code, "a limited address is refused whatever it presents")
	require.Equal(t, 429, do("198.51.100.9:3001", "").Code)
	require.Zero(t, served.Load())

	require.Equal(t, 200, do("203.0.113.5:1", goodToken).Code, "another address is not limited")
	require.Equal(t, 200, do("203.0.113.5:2", admin).Code)
	for range 10 {
		require.Equal(t, 200, do("203.0.113.6:1", goodToken).Code, "successes take nothing from the budget")
	}
	require.Equal(t, 401, do("203.0.113.6:1", "dcm_0000000000000000_bogus").Code)

	require.Equal(t, 6, logs.FilterField(zap.String("result", "unauthenticated")).Len(), "one line per failed authentication")
	limitedLines := logs.FilterField(zap.String("result", "rate-limited")).All()
	require.Len(t, limitedLines, 1, "one audit line sums up the 429s of an address per minute")
}
