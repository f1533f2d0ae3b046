package allinone_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// tokenLookups is how many times the token service was asked about a
// token in this process (core's gRPC metric): each is a store read.
func tokenLookups(t *testing.T) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "dcm_grpc_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "method" && strings.HasSuffix(l.GetValue(), "AuthService/Authenticate") {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// clientFrom is an HTTPS client of s that connects from the loopback
// address ip (Linux answers all of 127/8), presenting cert (nil: none).
func clientFrom(s *stacktest.Stack, ip string, cert *tls.Certificate) *http.Client {
	c := s.Client(cert)
	tr := c.Transport.(*http.Transport)
	tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}).DialContext
	return c
}

func withToken(t *testing.T, c *http.Client, token, u string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp
}

// TestAuthFailuresLimitedPerAddress runs the whole program with a burst of
// 3 failed authentications per address: well-formed bogus tokens are 401
// three times, then 429 with Retry-After, and the token service (a store
// read each) is not asked about the refused ones; the limited address is
// refused with the admin certificate too, while the admin token works from
// another address; /metrics answers the limited address 429 too. Not parallel: it counts a process-wide metric.
func TestAuthFailuresLimitedPerAddress(t *testing.T) {
	s := stacktest.StartWith(t, stacktest.Options{Args: []string{"-auth-failure-burst", "3", "-auth-failure-refill", "1h"}})
	u := s.URL + "/v2/projects"
	bad := clientFrom(s, "127.0.0.1", nil)
	bogus := func(i int) string { return fmt.Sprintf("dcm_%016x_%064x", i, i) }

	before := tokenLookups(t)
	for i := range 3 {
		resp := withToken(t, bad, bogus(i), u)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "failure %d", i)
	}
	require.Equal(t, before+3, tokenLookups(t), "each failure before the limit is a look-up")
	for i := range 10 {
		resp := withToken(t, bad, bogus(100+i), u)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		require.Equal(t, "3600", resp.Header.Get("Retry-After"))
	}
	require.Equal(t, before+3, tokenLookups(t), "no look-up for a limited address")

	resp, err := s.Admin.Get(u)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a limited address is refused whatever it presents")
	resp, err = s.Admin.Get(s.URL + "/metrics")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "/metrics shares the limit and says so")
	require.Equal(t, "3600", resp.Header.Get("Retry-After"))

	other := clientFrom(s, "127.0.0.2", nil)
	resp = withToken(t, other, s.AdminToken, u)
	require.Equal(t, http.StatusOK, resp.StatusCode, "another address is not limited")
}
