package allinone_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/secrets"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// syncBuffer collects a program's log lines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// do sends one request as c, with a bearer token unless it is empty.
func do(t *testing.T, c *http.Client, token, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b.Bytes()
}

// mint has the admin issue a token and returns it.
func mint(t *testing.T, s *stacktest.Stack, body string) string {
	t.Helper()
	code, b := apitest.Call(t, s.Admin, "POST", s.URL+"/v2/auth/tokens", body)
	require.Equal(t, 201, code, "%s", b)
	tok, _ := decode(t, b).(map[string]any)["token"].(string)
	require.NotEmpty(t, tok)
	return tok
}

// TestUnauthenticated: every wrong, expired or unknown credential gets the
// same 401 body, which says nothing about why.
func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	// More failures from one address than DCM_AUTH_FAILURE_BURST allows
	// (authlimit_test.go): here each must be a 401.
	s := stacktest.StartWith(t, stacktest.Options{Args: []string{"-auth-failure-burst", "1000"}})
	require.Equal(t, 201, first(apitest.Call(t, s.Admin, "POST", s.URL+"/v2/projects", `{"metadata":{"name":"p"}}`)))
	year := time.Now().Add(365 * 24 * time.Hour)
	expiredCert := s.Issue(t, pki.Identity{Subject: "old", Role: pki.RoleAdmin}, time.Now().Add(-time.Minute))
	other, err := pki.NewCA("elsewhere", time.Hour)
	require.NoError(t, err)
	c, k, err := other.Issue(pki.Request{Identity: pki.Identity{Subject: "x", Role: pki.RoleAdmin}, Client: true, NotAfter: year})
	require.NoError(t, err)
	strangerCert, err := tls.X509KeyPair(c, k)
	require.NoError(t, err)
	c, k, err = s.CA.Issue(pki.Request{Identity: pki.Identity{Subject: "srv", Role: pki.RoleAdmin}, Server: true, NotAfter: year})
	require.NoError(t, err)
	serverOnlyCert, err := tls.X509KeyPair(c, k)
	require.NoError(t, err)

	revoked := mint(t, s, `{"subject":"gone","role":"admin"}`)
	code, b := apitest.Call(t, s.Admin, "GET", s.URL+"/v2/auth/tokens", "")
	require.Equal(t, 200, code)
	var revokedID string
	for _, tok := range decode(t, b).([]any) {
		if m := tok.(map[string]any); m["subject"] == "gone" {
			revokedID = m["id"].(string)
		}
	}
	require.NotEmpty(t, revokedID)
	require.Equal(t, 204, first(apitest.Call(t, s.Admin, "DELETE", s.URL+"/v2/auth/tokens/"+revokedID, "")))
	expiring := mint(t, s, `{"subject":"brief","role":"admin","ttl":"1s"}`)
	good := mint(t, s, `{"subject":"ok","role":"admin"}`)
	require.Equal(t, 200, first(do(t, s.Client(nil), good, "GET", s.URL+"/v2/projects/p", "")))

	bare := s.Client(nil)
	cases := []struct {
		name   string
		client *http.Client
		header string
	}{
		{"no credentials", bare, ""},
		{"basic auth", bare, "Basic YWRtaW46YWRtaW4="},
		{"bearer without token", bare, "Bearer "},
		{"garbage token", bare, "Bearer not-a-token"},
		{"wrong admin token", bare, "Bearer " + pki.AdminTokenPrefix + strings.Repeat("0", 64)},
		{"unknown issued token", bare, "Bearer dcm_0123456789abcdef_" + strings.Repeat("ab", 32)},
		{"tampered issued token", bare, "Bearer " + good[:len(good)-1] + "x"},
		{"revoked token", bare, "Bearer " + revoked},
		{"expired certificate", s.Client(&expiredCert), ""},
		{"certificate of an unknown CA", s.Client(&strangerCert), ""},
		{"certificate not for client use", s.Client(&serverOnlyCert), ""},
		{"good certificate, bad token: the token decides", s.Admin, "Bearer not-a-token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest("GET", s.URL+"/v2/projects/p", nil)
			require.NoError(t, err)
			if c.header != "" {
				req.Header.Set("Authorization", c.header)
			}
			resp, err := c.client.Do(req)
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			require.Equal(t, 401, resp.StatusCode)
			require.JSONEq(t, `{"code":401,"status":"Unauthenticated","message":"authentication required"}`, body.String())
			require.Equal(t, `Bearer realm="dcm"`, resp.Header.Get("WWW-Authenticate"))
		})
	}
	require.Eventually(t, func() bool {
		return first(do(t, bare, expiring, "GET", s.URL+"/v2/projects/p", "")) == 401
	}, 20*time.Second, 100*time.Millisecond, "an expired token is refused")
	// Every route but /healthz and the API document and its page (TestOpenAPIWithoutCredential).
	for _, path := range []string{"/v2/projects", "/v2/cluster-providers", "/v2/cadist/roots", "/v2/auth/tokens", "/metrics", "/no/such/route"} {
		require.Equal(t, 401, first(do(t, bare, "", "GET", s.URL+path, "")), path)
	}
	for _, path := range []string{"/healthz", "/openapi.json", "/docs"} {
		require.Equal(t, 200, first(do(t, bare, "", "GET", s.URL+path, "")), path)
	}
	require.Equal(t, 200, first(do(t, bare, s.AdminToken, "GET", s.URL+"/v2/projects", "")), "the bootstrap admin token")
}

// authRoute is a route, a body it accepts, and the roles allowed to call it.
type authRoute struct {
	method, path, body string
	allowed            []string
}

// The roles of the authorization tests.
const (
	roleA = "admin"
	roleP = "project-admin of a"
	roleR = "reader of a"
	roleG = "global reader"
	roleS = "service certificate"
)

// authRoutes are every class of REST route and who may call it.
var authRoutes = []authRoute{
	{"GET", "/v2/projects", "", []string{roleA, roleG}},
	{"POST", "/v2/projects", `{"metadata":{"name":"new"}}`, []string{roleA}},
	{"GET", "/v2/projects/a", "", []string{roleA, roleP, roleR, roleG}},
	{"PUT", "/v2/projects/a", `{"metadata":{"name":"a","description":"x"}}`, []string{roleA, roleP}},
	{"GET", "/v2/projects/b", "", []string{roleA, roleG}},
	{"PUT", "/v2/projects/b", `{"metadata":{"name":"b"}}`, []string{roleA}},
	{"DELETE", "/v2/projects/b", "", []string{roleA}},
	{"GET", "/v2/projects/a/logical-clouds", "", []string{roleA, roleP, roleR, roleG}},
	{"POST", "/v2/projects/a/logical-clouds", `{}`, []string{roleA, roleP}},
	{"POST", "/v2/projects/b/logical-clouds", `{}`, []string{roleA}},
	{"POST", "/v2/projects/a/logical-clouds/control-plane", `{}`, []string{roleA, roleP}},
	{"POST", "/v2/projects/b/logical-clouds/control-plane", `{}`, []string{roleA}},
	{"GET", "/v2/projects/a/logical-clouds/l/user-permissions", "", []string{roleA, roleP, roleR, roleG}},
	{"POST", "/v2/projects/a/logical-clouds/l/user-permissions", `{}`, []string{roleA, roleP}},
	{"DELETE", "/v2/projects/b/logical-clouds/l/users", "", []string{roleA}},
	{"GET", "/v2/projects/b/logical-clouds/l/namespaces", "", []string{roleA, roleG}},
	{"PUT", "/v2/projects/a/logical-clouds/l/cluster-quotas/q", `{}`, []string{roleA, roleP}},
	{"GET", "/v2/projects/a/logical-clouds/l/container-defaults", "", []string{roleA, roleP, roleR, roleG}},
	{"PUT", "/v2/projects/a/logical-clouds/l/container-defaults", `{}`, []string{roleA, roleP}},
	{"DELETE", "/v2/projects/b/logical-clouds/l/container-defaults", "", []string{roleA}},
	{"POST", "/v2/projects/b/logical-clouds/l/cluster-providers/e/cluster-references", `{}`, []string{roleA}},
	{"GET", "/v2/projects/b/logical-clouds/l/kv-pairs", "", []string{roleA, roleG}},
	{"DELETE", "/v2/projects/a/logical-clouds/l", "", []string{roleA, roleP}},
	{"POST", "/v2/projects/a/logical-clouds/l/apply", "", []string{roleA, roleP}},
	{"POST", "/v2/projects/a/logical-clouds/l/terminate", "", []string{roleA, roleP}},
	{"GET", "/v2/projects/a/logical-clouds/l/status", "", []string{roleA, roleP, roleR, roleG}},
	{"GET", "/v2/projects/a/logical-clouds/l/status?watch=true", "", []string{roleA, roleP, roleR, roleG}},
	{"GET", "/v2/projects/b/logical-clouds/l/status?watch=true", "", []string{roleA, roleG}},
	{"GET", "/v2/projects/a/logical-clouds/l/quota-usage", "", []string{roleA, roleP, roleR, roleG}},
	// a kubeconfig is a credential: readers may not have one
	{"GET", "/v2/projects/a/logical-clouds/l/cluster-references/c/kubeconfig", "", []string{roleA, roleP}},
	{"GET", "/v2/projects/a/logical-clouds/l/cluster-providers/e/cluster-references/c/kubeconfig", "", []string{roleA, roleP}},
	{"GET", "/v2/projects/b/logical-clouds/l/cluster-references/c/kubeconfig", "", []string{roleA}},
	{"GET", "/v2/cluster-providers", "", []string{roleA, roleP, roleR, roleG}},
	{"POST", "/v2/cluster-providers", `{"metadata":{"name":"cp"}}`, []string{roleA}},
	{"DELETE", "/v2/cluster-providers/cp", "", []string{roleA}},
	{"GET", "/v2/cadist/roots", "", []string{roleA, roleP, roleR, roleG}},
	{"POST", "/v2/cadist/roots", `{"metadata":{"name":"r1"}}`, []string{roleA}},
	{"GET", "/v2/cadist/roots/r1/certificate", "", []string{roleA, roleP, roleR, roleG}},
	// a bundle is public (no key), read under its project
	{"GET", "/v1/cadist/projects/a/logicalclouds/l/clusters/c", "", []string{roleA, roleP, roleR, roleG}},
	{"GET", "/v1/cadist/projects/b/logicalclouds/l/clusters/c?cluster-provider=e", "", []string{roleA, roleG}},
	{"POST", "/v2/projects/a/logical-clouds/l/ca/rotate", `{}`, []string{roleA, roleP}},
	{"POST", "/v2/projects/b/logical-clouds/l/ca/rotate", `{"root":"r1"}`, []string{roleA}},
	{"GET", "/v2/auth/tokens", "", []string{roleA}},
	{"POST", "/v2/auth/tokens", `{"subject":"x","role":"reader"}`, []string{roleA}},
	{"POST", "/v2/admin/keys/rewrap", `{}`, []string{roleA}},
	{"GET", "/openapi.json", "", []string{roleA, roleP, roleR, roleG, roleS}}, // served to anyone
	// the process's metrics name clusters, routes and methods: admins only
	{"GET", "/metrics", "", []string{roleA}},
	// the traffic controller's routes, in both spellings
	{"GET", "/v2/project/a/rb/r/v1/traffic-intent-groups", "", []string{roleA, roleP, roleR, roleG}},
	{"POST", "/v2/project/a/rb/r/v1/traffic-intent-groups", `{"name":"g","logical-cloud":"l"}`, []string{roleA, roleP}},
	{"POST", "/v2/projects/b/rb/r/v1/traffic-intent-sets", `{"name":"g","logical-cloud":"l"}`, []string{roleA}},
	{"GET", "/v2/project/b/rb/r/v1/traffic-intent-groups/g", "", []string{roleA, roleG}},
	{"POST", "/v2/projects/a/rb/r/v1/intent/g/connectivity/intracluster", `{"connectivityResource":[{"id":"m","name":"m","port":80}]}`, []string{roleA, roleP}},
	{"POST", "/v2/project/b/rb/r/v1/traffic-intent-groups/g/intraclusterservice", `{"connectivityResource":[{"id":"m","name":"m","port":80}]}`, []string{roleA}},
	{"GET", "/v2/projects/b/rb/r/v1/intent/g/connectivity/dnsproviders", "", []string{roleA, roleG}},
	// a project's DNS allow-list: its members read it, admins alone set it
	// (the traffic service refuses a project-admin: 403 too)
	{"GET", "/v2/projects/a/dns-allow-list", "", []string{roleA, roleP, roleR, roleG}},
	{"PUT", "/v2/projects/a/dns-allow-list", `{"servers":["192.0.2.53:53"],"zones":["example.com"]}`, []string{roleA}},
	{"DELETE", "/v2/projects/a/dns-allow-list", "", []string{roleA}},
	// cluster sets: read like the cluster registry, changed by admins
	// alone; a project's bindings read by its members, changed by admins
	// alone (core refuses a project-admin: 403 too)
	{"GET", "/v2/cluster-sets", "", []string{roleA, roleP, roleR, roleG}},
	{"POST", "/v2/cluster-sets", `{"metadata":{"name":"s1"},"spec":{"all-clusters":true}}`, []string{roleA}},
	{"PUT", "/v2/cluster-sets/s1", `{"metadata":{"name":"s1"},"spec":{"all-clusters":true}}`, []string{roleA}},
	{"GET", "/v2/projects/a/cluster-set-bindings", "", []string{roleA, roleP, roleR, roleG}},
	{"POST", "/v2/projects/a/cluster-set-bindings", `{"cluster-set":"s1"}`, []string{roleA}},
	{"DELETE", "/v2/projects/a/cluster-set-bindings/s1", "", []string{roleA}},
	{"GET", "/v2/projects/b/cluster-set-bindings", "", []string{roleA, roleG}},
	{"DELETE", "/v2/project/b/rb/r/v1/traffic-intent-sets/g/externalinboundaccess/i", "", []string{roleA}},
	{"PUT", "/v2/projects/a/rb/r/v1/traffic-intent-groups/g", `{"logical-cloud":"l"}`, []string{roleA, roleP}},
	{"POST", "/v2/project/b/rb/r/v1/traffic-intent-groups/g/apply", "", []string{roleA}},
}

func (r authRoute) allows(role string) bool {
	for _, a := range r.allowed {
		if a == role {
			return true
		}
	}
	return false
}

// authWho is one identity of a role: a certificate or a token.
type authWho struct {
	name  string
	c     *http.Client
	token string
}

// authStack starts the whole program with projects a and b and the
// identities of every role, as a certificate and as a token.
func authStack(t *testing.T, logs io.Writer) (*stacktest.Stack, map[string][]authWho) {
	s := stacktest.StartWith(t, stacktest.Options{Logs: logs})
	for _, p := range []string{"a", "b"} {
		require.Equal(t, 201, first(apitest.Call(t, s.Admin, "POST", s.URL+"/v2/projects", `{"metadata":{"name":"`+p+`"}}`)))
	}
	year := time.Now().Add(365 * 24 * time.Hour)
	cert := func(id pki.Identity) *http.Client { c := s.Issue(t, id, year); return s.Client(&c) }
	bare := s.Client(nil)
	return s, map[string][]authWho{
		roleA: {{"cert", s.Admin, ""}, {"token", bare, mint(t, s, `{"subject":"adm","role":"admin"}`)}},
		roleP: {
			{"cert", cert(pki.Identity{Subject: "pa", Role: pki.RoleProjectAdmin, Project: "a"}), ""},
			{"token", bare, mint(t, s, `{"subject":"pa","role":"project-admin","project":"a"}`)},
		},
		roleR: {
			{"cert", cert(pki.Identity{Subject: "ra", Role: pki.RoleReader, Project: "a"}), ""},
			{"token", bare, mint(t, s, `{"subject":"ra","role":"reader","project":"a"}`)},
		},
		roleG: {
			{"cert", cert(pki.Identity{Subject: "r", Role: pki.RoleReader}), ""},
			{"token", bare, mint(t, s, `{"subject":"r","role":"reader"}`)},
		},
		roleS: {{"cert", cert(pki.Identity{Subject: "svc", Role: pki.RoleService}), ""}},
	}
}

// TestAuthorization walks every class of route with every role, as a
// certificate and as a token: allowed calls get through (whatever the
// service answers), the rest get 403. A URL no route serves is 404 for
// everyone: authorization happens on the route the router matched.
func TestAuthorization(t *testing.T) {
	t.Parallel()
	s, roles := authStack(t, nil)
	for _, r := range authRoutes {
		for role, ws := range roles {
			for _, w := range ws {
				code, body := do(t, w.c, w.token, r.method, s.URL+r.path, r.body)
				if r.allows(role) {
					require.NotContains(t, []int{401, 403}, code, "%s %s as %s (%s): %s", r.method, r.path, role, w.name, body)
				} else {
					require.Equal(t, 403, code, "%s %s as %s (%s): %s", r.method, r.path, role, w.name, body)
				}
			}
		}
	}
	for _, path := range []string{"/v2/project/b/rb/r/v1/no-such", "/v1/cadist/projects/b/logicalclouds", "/v2/no-such"} {
		for role, ws := range roles {
			require.Equal(t, 404, first(do(t, ws[0].c, ws[0].token, "GET", s.URL+path, "")), "%s as %s", path, role)
		}
	}
}

// TestClusterConnectionForAdminsOnly: a registered cluster's status (its
// API server's URL and its kubeconfig's fingerprint) is in the answers an
// admin reads, and in no answer a project-admin or a reader (of a project
// or global) gets, read one by one or listed. (Before, every role read
// both.)
func TestClusterConnectionForAdminsOnly(t *testing.T) {
	t.Parallel()
	s, roles := authStack(t, nil)
	const apiServer = "https://192.0.2.10:6443"
	kc, _ := kubeconfig(t, s.CA, apiServer)
	require.Equal(t, 201, first(apitest.Call(t, s.Admin, "POST", s.URL+"/v2/cluster-providers", `{"metadata":{"name":"e"}}`)))
	code, b := apitest.Call(t, s.Admin, "POST", s.URL+"/v2/cluster-providers/e/clusters", jsonOf(t, map[string]any{
		"metadata": map[string]any{"name": "c1"}, "spec": map[string]any{"kubeconfig": kc, "labels": []string{"edge"}}}))
	require.Equal(t, 201, code, "%s", b)
	for role, ws := range roles {
		if role == roleS {
			continue // no REST role
		}
		for _, w := range ws {
			for _, path := range []string{"/v2/cluster-providers/e/clusters/c1", "/v2/cluster-providers/e/clusters", "/v2/cluster-providers/e/clusters?label=edge"} {
				code, body := do(t, w.c, w.token, "GET", s.URL+path, "")
				require.Equal(t, 200, code, "%s as %s (%s): %s", path, role, w.name, body)
				require.Contains(t, string(body), `"c1"`, "%s as %s (%s)", path, role, w.name)
				if role == roleA {
					require.Contains(t, string(body), apiServer, "%s as %s (%s)", path, role, w.name)
					require.Contains(t, string(body), `"kubeconfig-fingerprint":"sha256:`, "%s as %s (%s)", path, role, w.name)
					continue
				}
				require.NotContains(t, string(body), "192.0.2.10", "%s as %s (%s): %s", path, role, w.name, body)
				require.NotContains(t, string(body), "sha256:", "%s as %s (%s): %s", path, role, w.name, body)
			}
		}
	}
}

// spellings are other ways to write path: each segment in turn with one
// letter percent-encoded in lower-case hex, then in upper-case hex, then
// the whole segment encoded with mixed case; and (double) each segment
// with a letter encoded twice, which must not decode to the route.
func spellings(path string) (same, double []string) {
	p, query, _ := strings.Cut(path, "?")
	if query != "" {
		query = "?" + query
	}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	with := func(i int, seg string) string {
		c := slices.Clone(segs)
		c[i] = seg
		return "/" + strings.Join(c, "/") + query
	}
	for i, seg := range segs {
		j := strings.IndexFunc(seg, func(r rune) bool { return r >= 'a' && r <= 'z' })
		if j < 0 {
			continue
		}
		hex := fmt.Sprintf("%02x", seg[j])
		same = append(same,
			with(i, seg[:j]+"%"+hex+seg[j+1:]),
			with(i, seg[:j]+"%"+strings.ToUpper(hex)+seg[j+1:]))
		var all strings.Builder
		for k := 0; k < len(seg); k++ {
			h := fmt.Sprintf("%02x", seg[k])
			if k%2 == 1 {
				h = strings.ToUpper(h)
			}
			all.WriteString("%" + h)
		}
		same = append(same, with(i, all.String()))
		double = append(double, with(i, seg[:j]+"%25"+hex+seg[j+1:]))
	}
	return same, double
}

// TestAuthorizationEncodedPaths: every spelling of every route is
// authorized as the route it reaches: a percent-encoded letter (any hex
// case) answers exactly what the plain URL answers, a double-encoded one
// reaches no route, an encoded "/" is 400; every refusal is audited with
// the path as sent.
func TestAuthorizationEncodedPaths(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	s, roles := authStack(t, logs)
	tokens := map[string]authWho{}
	for role, ws := range roles {
		tokens[role] = ws[len(ws)-1] // the token, or the service's certificate
	}
	var refused []string
	for _, r := range authRoutes {
		if r.method != "GET" && r.method != "HEAD" {
			continue // a spelling that reached a write would change what the next case sees
		}
		same, double := spellings(r.path)
		for role, w := range tokens {
			plain, _ := do(t, w.c, w.token, r.method, s.URL+r.path, r.body)
			for _, sp := range same {
				code, body := do(t, w.c, w.token, r.method, s.URL+sp, r.body)
				require.Equal(t, plain, code, "%s %s as %s answers as %s does: %s", r.method, sp, role, r.path, body)
				if code == 403 {
					refused = append(refused, strings.SplitN(sp, "?", 2)[0])
				}
			}
			for _, sp := range double {
				code, body := do(t, w.c, w.token, r.method, s.URL+sp, r.body)
				require.Contains(t, []int{400, 403, 404}, code, "%s %s as %s: %s", r.method, sp, role, body)
			}
		}
	}
	// The issue's own spellings, as a reader of a.
	reader := tokens[roleR]
	for _, p := range []string{
		"/v2/project%73/b/logical-clouds/l/cluster-references/c/kubeconfi%67",
		"/v2/projects/a/logical-clouds/l/cluster-references/c/kubeconfi%67",
		"/v2/project%73",
		"/v2/aut%68/tokens",
		"/v2/%61uth/tokens",
	} {
		require.Equal(t, 403, first(do(t, reader.c, reader.token, "GET", s.URL+p, "")), p)
	}
	for _, p := range []string{"/v2/projects/a%2Fb", "/v2/projects/a%2fb/logical-clouds", "/v2/projects/a/logical-clouds/l%2F..%2F..%2Fb"} {
		code, body := do(t, tokens[roleA].c, tokens[roleA].token, "GET", s.URL+p, "")
		require.Equal(t, 400, code, "%s: %s", p, body)
		require.Equal(t, "path", decode(t, body).(map[string]any)["field"])
		requireAudit(t, logs.String(), map[string]any{"raw_path": p, "status": 400.0, "result": "refused"})
	}
	require.NotEmpty(t, refused)
	for _, p := range append(refused, "/v2/project%73/b/logical-clouds/l/cluster-references/c/kubeconfi%67") {
		requireAudit(t, logs.String(), map[string]any{"raw_path": p, "status": 403.0, "result": "forbidden"})
	}
	// A credential read is audited even when it succeeds or fails further on.
	requireAudit(t, logs.String(), map[string]any{
		"subject": "adm", "http.method": "GET", "raw_path": "/v2/projects/a/logical-clouds/l/cluster-references/c/kubeconfig",
		"credential": true, "status": 404.0,
	})
	requireAudit(t, logs.String(), map[string]any{"subject": "adm", "http.method": "GET", "object": "/v2/auth/tokens", "credential": true, "status": 200.0})
}

// TestCallerMetadataNotForwarded: a client cannot set the caller identity
// the gateway forwards to the services (Grpc-Metadata-* headers are
// dropped): a project-admin stays a project-admin.
func TestCallerMetadataNotForwarded(t *testing.T) {
	t.Parallel()
	s, roles := authStack(t, nil)
	pa := roles[roleP][1]
	req, err := http.NewRequest("POST", s.URL+"/v2/projects/a/logical-clouds", strings.NewReader(`{"metadata":{"name":"priv"},"spec":{"level":"privileged"}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+pa.token)
	req.Header.Set("Grpc-Metadata-Dcm-Caller-Role", "admin")
	req.Header.Set("Grpc-Metadata-Dcm-Caller-Subject", "admin")
	resp, err := pa.c.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, 403, resp.StatusCode, "a project-admin may not create a privileged logical cloud, whatever headers it sends")
}

// TestTokens: minting checks its input, the list never shows a token,
// revocation works at once.
func TestTokens(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	require.Equal(t, 201, first(apitest.Call(t, s.Admin, "POST", s.URL+"/v2/projects", `{"metadata":{"name":"a"}}`)))
	for _, c := range []struct{ body, field string }{
		{`{"subject":"x","role":"root"}`, "role"},
		{`{"subject":"","role":"reader"}`, "subject"},
		{`{"subject":"a b","role":"reader"}`, "subject"},
		{`{"subject":"x","role":"project-admin"}`, "project"},
		{`{"subject":"x","role":"admin","project":"a"}`, "project"},
		{`{"subject":"x","role":"reader","project":"missing"}`, "project"},
		{`{"subject":"x","role":"reader","project":"Not_A_Name"}`, "project"},
		{`{"subject":"x","role":"reader","ttl":"0s"}`, "ttl"},
		{`{"subject":"x","role":"reader","ttl":"forever"}`, "ttl"},
		{`{"subject":"x","role":"reader","extra":1}`, "extra"},
	} {
		code, b := apitest.Call(t, s.Admin, "POST", s.URL+"/v2/auth/tokens", c.body)
		require.Equal(t, 400, code, "%s: %s", c.body, b)
		require.Equal(t, c.field, decode(t, b).(map[string]any)["field"], "%s: %s", c.body, b)
	}
	code, b := apitest.Call(t, s.Admin, "POST", s.URL+"/v2/auth/tokens", `{"subject":"ci@example.com","role":"project-admin","project":"a","ttl":"1h"}`)
	require.Equal(t, 201, code, "%s", b)
	created := decode(t, b).(map[string]any)
	tok := created["token"].(string)
	info := created["info"].(map[string]any)
	require.Equal(t, "project-admin", info["role"])
	require.Equal(t, "a", info["project"])
	require.NotEmpty(t, info["expireTime"])

	code, b = apitest.Call(t, s.Admin, "GET", s.URL+"/v2/auth/tokens", "")
	require.Equal(t, 200, code)
	require.Len(t, decode(t, b).([]any), 1, "only the minted token: the bootstrap one is a file")
	require.NotContains(t, string(b), strings.Split(tok, "_")[2], "the list never shows a token's secret")

	require.Equal(t, 200, first(do(t, s.Client(nil), tok, "PUT", s.URL+"/v2/projects/a", `{"metadata":{"name":"a","description":"by token"}}`)))
	require.Equal(t, 204, first(apitest.Call(t, s.Admin, "DELETE", s.URL+"/v2/auth/tokens/"+info["id"].(string), "")))
	require.Equal(t, 401, first(do(t, s.Client(nil), tok, "GET", s.URL+"/v2/projects/a", "")), "revoked at once")
	require.Equal(t, 404, first(apitest.Call(t, s.Admin, "DELETE", s.URL+"/v2/auth/tokens/"+info["id"].(string), "")))
}

// TestBootstrapFiles: the first start writes the local CA, certificates,
// admin token and keyring with mode 0600, and a restart reuses them.
func TestBootstrapFiles(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	want := []string{"pki/ca.crt", "pki/ca.key", "pki/server.crt", "pki/server.key", "pki/admin.crt", "pki/admin.key", "pki/admin.token", "kek"}
	before := map[string][]byte{}
	for _, f := range want {
		st, err := os.Stat(filepath.Join(s.DataDir, f))
		require.NoError(t, err, f)
		require.Equal(t, fs.FileMode(0o600), st.Mode().Perm(), f)
		before[f], err = os.ReadFile(filepath.Join(s.DataDir, f))
		require.NoError(t, err)
	}
	token := s.AdminToken
	s.Stop()
	s = stacktest.StartWith(t, stacktest.Options{DataDir: s.DataDir})
	for _, f := range want {
		b, err := os.ReadFile(filepath.Join(s.DataDir, f))
		require.NoError(t, err)
		require.Equal(t, before[f], b, "%s is kept across restarts", f)
	}
	require.Equal(t, 200, first(do(t, s.Client(nil), token, "GET", s.URL+"/v2/projects", "")))
}

// TestInsecureHTTP: DCM_INSECURE_HTTP serves plain HTTP on loopback, and
// still requires a token.
func TestInsecureHTTP(t *testing.T) {
	t.Parallel()
	s := stacktest.StartWith(t, stacktest.Options{Args: []string{"-insecure-http=true"}})
	require.True(t, strings.HasPrefix(s.URL, "http://"))
	require.Equal(t, 401, first(do(t, http.DefaultClient, "", "GET", s.URL+"/v2/projects", "")))
	require.Equal(t, 200, first(do(t, http.DefaultClient, s.AdminToken, "GET", s.URL+"/v2/projects", "")))
	require.Equal(t, 200, first(do(t, http.DefaultClient, "", "GET", s.URL+"/healthz", "")))
}

// TestInsecureGRPCProgram: the whole program runs on plaintext gRPC
// (DCM_INSECURE_GRPC) with the allow-lists on: its services call each
// other as the program they name (pki.AllInOne), a project is made and
// read through the gateway, and a plaintext call that names no program
// gets only health.
func TestInsecureGRPCProgram(t *testing.T) {
	t.Parallel()
	s := stacktest.StartWith(t, stacktest.Options{Args: []string{"-insecure-grpc=true"}})
	require.Equal(t, 201, first(apitest.Call(t, s.Admin, "POST", s.URL+"/v2/projects", `{"metadata":{"name":"plain"}}`)))
	require.Equal(t, 200, first(apitest.Call(t, s.Admin, "GET", s.URL+"/v2/projects/plain", "")))
	conn, err := client.Dial(s.GRPC, nil)
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = corev1.NewCoreServiceClient(conn).GetProject(ctx, &corev1.GetProjectRequest{Project: "plain"})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
}

// kubeconfig returns an admin kubeconfig with inline credentials issued
// by ca, and the PEM of its client key.
func kubeconfig(t *testing.T, ca *pki.CA, server string) (string, string) {
	t.Helper()
	c, k, err := ca.Issue(pki.Request{Identity: pki.Identity{Subject: "kubernetes-admin", Role: "system:masters"}, Client: true, NotAfter: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: edge
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: admin@edge
  context: {cluster: edge, user: admin}
current-context: admin@edge
`, server, b64(pki.CertPEM(ca.Cert.Raw)), b64(c), b64(k)), string(k)
}

// TestSecretsAtRest registers kubeconfigs and CA keys, reads them back,
// rotates the key-encryption key, and checks that neither the store's
// files nor the logs ever held them in clear.
func TestSecretsAtRest(t *testing.T) {
	t.Parallel()
	if os.Getenv("DCM_TEST_MONGO_URI") != "" {
		t.Skip("reads the embedded store's files")
	}
	logs := &syncBuffer{}
	s := stacktest.StartWith(t, stacktest.Options{Logs: logs, Args: []string{"-log-level", "debug"}})
	dir := s.DataDir
	kc, clientKey := kubeconfig(t, s.CA, "https://10.0.0.1:6443")
	rootCert, rootKey, err := s.CA.Issue(pki.Request{Identity: pki.Identity{Subject: "imported"}, NotAfter: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	importedCA, err := pki.NewRootCA("imported-root", time.Hour, 1) // a root that can sign intermediates
	require.NoError(t, err)
	importedKey, err := pki.KeyPEM(importedCA.Key)
	require.NoError(t, err)
	_, _ = rootCert, rootKey
	jsonStr := func(v string) string { return fmt.Sprintf("%q", v) }

	require.Equal(t, 201, first(apitest.Call(t, s.Admin, "POST", s.URL+"/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)))
	code, b := apitest.Call(t, s.Admin, "POST", s.URL+"/v2/cluster-providers/edge/clusters",
		`{"metadata":{"name":"c1"},"spec":{"kubeconfig":`+jsonStr(kc)+`,"labels":["edge"]}}`)
	require.Equal(t, 201, code, "%s", b)
	require.NotContains(t, string(b), "client-key-data")
	code, b = apitest.Call(t, s.Admin, "POST", s.URL+"/v2/cadist/roots",
		`{"metadata":{"name":"imported"},"certificate":`+jsonStr(string(pki.CertPEM(importedCA.Cert.Raw)))+`,"privateKey":`+jsonStr(string(importedKey))+`}`)
	require.Equal(t, 201, code, "%s", b)
	require.Equal(t, 201, first(apitest.Call(t, s.Admin, "POST", s.URL+"/v2/cadist/roots", `{"metadata":{"name":"generated"}}`)))
	// A refused kubeconfig is not echoed either.
	code, b = apitest.Call(t, s.Admin, "POST", s.URL+"/v2/cluster-providers/edge/clusters",
		`{"metadata":{"name":"c2"},"spec":{"kubeconfig":`+jsonStr(strings.Replace(kc, "current-context: admin@edge", "current-context: nope", 1))+`}}`)
	require.Equal(t, 400, code)
	require.Equal(t, "spec.kubeconfig", decode(t, b).(map[string]any)["field"])
	require.NotContains(t, string(b), "LS0t", "no base64 PEM in the error")

	for _, path := range []string{"/v2/cluster-providers/edge/clusters/c1", "/v2/cluster-providers/edge/clusters", "/v2/cadist/roots", "/v2/cadist/roots/imported"} {
		code, b := apitest.Call(t, s.Admin, "GET", s.URL+path, "")
		require.Equal(t, 200, code)
		require.NotContains(t, string(b), "PRIVATE KEY", path)
		require.NotContains(t, string(b), "client-key-data", path)
	}
	code, b = apitest.Call(t, s.Admin, "GET", s.URL+"/v2/cluster-providers/edge/clusters/c1", "")
	require.Equal(t, 200, code)
	st := decode(t, b).(map[string]any)["status"].(map[string]any)
	require.Equal(t, "https://10.0.0.1:6443", st["server"])
	require.True(t, strings.HasPrefix(st["kubeconfig-fingerprint"].(string), "sha256:"))

	require.Equal(t, 401, first(do(t, s.Client(nil), pki.AdminTokenPrefix+"0", "POST", s.URL+"/v2/cadist/roots", `{}`)))

	// Rotate: a new key first, the old one kept to open; rewrap; then the new key alone.
	s.Stop()
	oldRing, err := os.ReadFile(filepath.Join(dir, "kek"))
	require.NoError(t, err)
	ring := filepath.Join(t.TempDir(), "keyring")
	require.NoError(t, os.WriteFile(ring, []byte(secrets.NewKeyLine("k2")+string(oldRing)), 0o600))
	s = stacktest.StartWith(t, stacktest.Options{DataDir: dir, Logs: logs, Args: []string{"-log-level", "debug", "-kek-file", ring}})
	code, b = apitest.Call(t, s.Admin, "POST", s.URL+"/v2/admin/keys/rewrap", `{}`)
	require.Equal(t, 200, code, "%s", b)
	require.JSONEq(t, `{"keyId":"k2","records":3,"values":3,"unchanged":0}`, string(b))
	code, b = apitest.Call(t, s.Admin, "POST", s.URL+"/v2/admin/keys/rewrap", `{}`)
	require.Equal(t, 200, code)
	require.JSONEq(t, `{"keyId":"k2","records":0,"values":0,"unchanged":3}`, string(b))
	s.Stop()

	// Every value is now under its service's key derived from k2, which
	// that service's keys alone open (what dcm-kek derive gives its
	// Deployment), and another service's do not.
	newOnly, err := secrets.ParseKeyring(strings.SplitAfter(mustRead(t, ring), "\n")[0])
	require.NoError(t, err)
	records := func(st *store.Store, service, coll string) *store.Records[*structpb.Struct] {
		view, err := st.For(service)
		require.NoError(t, err)
		return store.NewRecords(view, coll, coll, func() *structpb.Struct { return &structpb.Struct{} })
	}
	values := []struct{ service, coll, id, name, want string }{
		{"rsync", "clusters", "edge/c1", "kubeconfig", kc},
		{"cadist", "ca_roots", "imported", "private_key", string(importedKey)},
	}
	for _, v := range values {
		k, err := newOnly.For(v.service)
		require.NoError(t, err)
		own, err := secrets.ParseKeyring(k.Lines())
		require.NoError(t, err)
		st2, err := store.Open(store.Config{Database: "dcm", DataDir: dir, Keyring: own}, zap.NewNop())
		require.NoError(t, err)
		got, err := records(st2, v.service, v.coll).Secret(context.Background(), v.id, v.name)
		require.NoError(t, err, "%s opens with %s's key derived from k2 alone", v.id, v.service)
		require.Equal(t, v.want, string(got))
		var doc struct {
			Secrets []struct {
				KeyID string `bson:"key_id"`
			} `bson:"secrets"`
		}
		require.NoError(t, st2.Database().Collection(v.coll).FindOne(context.Background(), map[string]any{"_id": v.id}).Decode(&doc))
		require.Equal(t, "k2@"+v.service, doc.Secrets[0].KeyID)
		st2.Close(context.Background())
	}
	st2, err := store.Open(store.Config{Database: "dcm", DataDir: dir, Keyring: newOnly}, zap.NewNop())
	require.NoError(t, err)
	for _, v := range values {
		_, err := records(st2, "quota", v.coll).Secret(context.Background(), v.id, v.name)
		require.Error(t, err, "the quota service's keys do not open %s's %s", v.service, v.name)
		require.NotContains(t, err.Error(), "PRIVATE KEY")
	}
	st2.Close(context.Background())

	// Nothing in clear, in the store's files or in the logs; the scan does
	// see what is stored in clear (the server URL).
	require.True(t, storetest.FilesContain(t, filepath.Join(dir, "store"), []byte("https://10.0.0.1:6443")))
	require.NotEmpty(t, logs.String())
	for _, needle := range []string{"PRIVATE KEY", "client-key-data", strings.Split(clientKey, "\n")[1], strings.Split(string(importedKey), "\n")[1], base64.StdEncoding.EncodeToString([]byte(clientKey))[:40]} {
		require.False(t, storetest.FilesContain(t, filepath.Join(dir, "store"), []byte(needle)), "store files hold %q", needle)
		require.NotContains(t, logs.String(), needle)
	}
	requireAudit(t, logs.String(), map[string]any{
		"subject": "admin", "role": "admin", "auth": "certificate", "http.method": "POST",
		"object": "/v2/cluster-providers/edge/clusters", "route": "/v2/cluster-providers/{provider}/clusters",
		"rpc": "/dcm.rsync.v1.RsyncService/CreateCluster", "status": 201.0, "result": "ok",
	})
	requireAudit(t, logs.String(), map[string]any{
		"subject": "admin", "http.method": "POST", "object": "/v2/cluster-providers/edge/clusters", "status": 400.0, "result": "error",
	})
	requireAudit(t, logs.String(), map[string]any{"http.method": "POST", "object": "/v2/admin/keys/rewrap", "status": 200.0, "result": "ok"})
	requireAudit(t, logs.String(), map[string]any{
		"http.method": "POST", "object": "/v2/cadist/roots", "status": 401.0, "result": "unauthenticated",
		"reason": "authentication required\nwrong admin token",
	})
}

// requireAudit finds an audit line with every field of want.
func requireAudit(t *testing.T, logs string, want map[string]any) {
	t.Helper()
	for _, line := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["logger"] != "dcm.audit" {
			continue
		}
		match := m["request_id"] != ""
		for k, v := range want {
			match = match && m[k] == v
		}
		if match {
			return
		}
	}
	t.Fatalf("no audit line with %v", want)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
