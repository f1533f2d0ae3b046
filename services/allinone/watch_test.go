package allinone_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// openWatches reads the gauge of status watches core serves.
func openWatches(t *testing.T, s *stacktest.Stack) string {
	t.Helper()
	code, b := apitest.Call(t, s.Admin, "GET", s.URL+"/metrics", "")
	require.Equal(t, 200, code)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "dcm_core_status_watches_open "); ok {
			return v
		}
	}
	return "absent"
}

// TestWatchBounds: a status watch on a logical cloud whose only cluster is
// down (it never settles) ends cleanly at DCM_WATCH_MAX, though the
// HTTP write timeout is shorter; and a watch whose client goes ends on the
// server at once, not at its maximum.
func TestWatchBounds(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	down := h.Clusters[2]
	down.StopAPIServer()
	t.Cleanup(func() { require.NoError(t, down.StartAPIServer(context.Background())) })

	start := func(t *testing.T, args ...string) (*stacktest.Stack, *apitest.REST, string) {
		s := stacktest.StartWith(t, stacktest.Options{Args: args})
		r := apitest.NewREST(t, s)
		apitest.RegisterHarness(t, r, h)
		r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"watch"}}`)
		lc := "/v2/projects/watch/logical-clouds/lc-w"
		r.Want(201, "POST", "/v2/projects/watch/logical-clouds", `{"metadata":{"name":"lc-w"},"spec":{"namespace":"watch-ns"}}`)
		r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+down.Name+`"}`)
		r.Want(202, "POST", lc+"/apply", "")
		return s, r, lc
	}

	t.Run("ends at its maximum", func(t *testing.T) {
		_, r, lc := start(t, "-watch-max", "3s", "-http-write-timeout", "1s")
		began := time.Now()
		all := r.Watch(lc) // requires 200, no error line, a clean end
		require.GreaterOrEqual(t, time.Since(began), 3*time.Second, "it ended at the maximum, not at the write timeout")
		require.Equal(t, "Instantiating", all[len(all)-1].State, "it never settled: %+v", all[len(all)-1])
	})

	t.Run("at most N per credential", func(t *testing.T) {
		s, r, lc := start(t, "-max-watches", "2")
		open := func(c *http.Client, token string) (*http.Response, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(ctx, "GET", r.Base+lc+"/status?watch=true", nil)
			require.NoError(t, err)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			cc := *c
			cc.Timeout = 0
			resp, err := cc.Do(req)
			require.NoError(t, err)
			t.Cleanup(func() { cancel(); _ = resp.Body.Close() })
			return resp, cancel
		}
		first, stop := open(s.Admin, "")
		require.Equal(t, 200, first.StatusCode)
		second, _ := open(s.Admin, "")
		require.Equal(t, 200, second.StatusCode)
		third, _ := open(s.Admin, "")
		b, err := io.ReadAll(third.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusTooManyRequests, third.StatusCode, "%s", b)
		require.JSONEq(t, `{"code":429,"status":"ResourceExhausted","message":"at most 2 status watches at once per credential (DCM_MAX_WATCHES): end one first"}`, string(b))

		// Another credential has slots of its own.
		other, _ := open(s.Client(nil), s.AdminToken)
		require.Equal(t, 200, other.StatusCode)

		// A watch that ends gives its slot back.
		stop()
		apitest.Eventually(t, "the slot is given back", func() bool {
			resp, cancel := open(s.Admin, "")
			if resp.StatusCode == 200 {
				return true
			}
			cancel()
			return false
		})
	})

	t.Run("ends when the client goes", func(t *testing.T) {
		s, r, lc := start(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", r.Base+lc+"/status?watch=true", nil)
		require.NoError(t, err)
		c := *r.C
		c.Timeout = 0
		resp, err := c.Do(req)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		firstWatched(t, resp.Body)
		require.Equal(t, "1", openWatches(t, s))

		cancel()
		_ = resp.Body.Close()
		apitest.Eventually(t, "the server-side watch ended", func() bool { return openWatches(t, s) == "0" })
	})
}

// TestWatchErrors: a status watch refused before its stream began
// answers, in both spellings, exactly as GET .../status of the same
// logical cloud does: errs' status and body (a missing logical cloud 404
// naming it, a bad name 400 naming the field), not grpc-gateway's stream
// shape ({"error": {"code": 5, ...}}) and mapping.
func TestWatchErrors(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"we"}}`)
	for _, tc := range []struct {
		name, lc string
		code     int
		status   string
		field    string
		names    string // what the message names
	}{
		{"missing", "lc-none", 404, "NotFound", "", "lc-none"},
		{"bad parameter", "Not_A_Label", 400, "InvalidArgument", "logical-cloud", "DNS-1123 label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := "/v2/projects/we/logical-clouds/" + tc.lc + "/status"
			code, plain := apitest.Call(t, s.Admin, "GET", s.URL+base, "")
			require.Equal(t, tc.code, code, "GET %s: %s", base, plain)
			for _, watch := range []string{base + "?watch=true", base + "/watch"} {
				code, b := apitest.Call(t, s.Admin, "GET", s.URL+watch, "")
				require.Equal(t, tc.code, code, "GET %s: %s", watch, b)
				require.JSONEq(t, string(plain), string(b), "GET %s answers as GET %s", watch, base)
				var body errs.Body
				require.NoError(t, json.Unmarshal(b, &body), "%s", b)
				require.Equal(t, tc.code, body.Code)
				require.Equal(t, tc.status, body.Status)
				require.Equal(t, tc.field, body.Field)
				require.Contains(t, body.Message, tc.names)
			}
		})
	}
}
