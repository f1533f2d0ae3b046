package allinone_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// apiDoc is the part of the served OpenAPI document the tests read.
type apiDoc struct {
	Swagger string `json:"swagger"`
	Info    struct {
		Title, Version string
	} `json:"info"`
	SecurityDefinitions map[string]struct {
		Type, In, Name, Description string
	} `json:"securityDefinitions"`
	Security    []map[string][]string `json:"security"`
	Paths       map[string]map[string]apiOp
	Definitions map[string]apiDef          `json:"definitions"`
	Responses   map[string]json.RawMessage `json:"responses"`
}

type apiDef struct {
	Properties map[string]struct {
		Type string   `json:"type"`
		Enum []string `json:"enum"`
	} `json:"properties"`
	Required []string `json:"required"`
}

type apiOp struct {
	OperationID string                     `json:"operationId"`
	Responses   map[string]json.RawMessage `json:"responses"`
}

// success is the one 2xx status op documents.
func (op apiOp) success(t *testing.T) int {
	t.Helper()
	var codes []int
	for k := range op.Responses {
		if c, err := strconv.Atoi(k); err == nil && c >= 200 && c < 300 {
			codes = append(codes, c)
		}
	}
	require.Len(t, codes, 1, "%s documents one success status", op.OperationID)
	return codes[0]
}

// rpc is the method name of op's RPC: its operationId after the service,
// without the number of a second or later binding.
func (op apiOp) rpc() string {
	_, m, _ := strings.Cut(op.OperationID, "_")
	return strings.TrimRight(m, "0123456789")
}

// readDoc fetches /openapi.json without a credential.
func readDoc(t *testing.T, s *stacktest.Stack) apiDoc {
	t.Helper()
	code, body := do(t, s.Client(nil), "", "GET", s.URL+"/openapi.json", "")
	require.Equal(t, 200, code, "%s", body)
	var doc apiDoc
	require.NoError(t, json.Unmarshal(body, &doc))
	require.NotEmpty(t, doc.Paths)
	return doc
}

// schemaOf is the definition an operation's answer with code refers to
// (through a shared response).
func (doc apiDoc) schemaOf(t *testing.T, op apiOp, code int) (string, apiDef) {
	t.Helper()
	raw, ok := op.Responses[strconv.Itoa(code)]
	require.True(t, ok, "%s: %d is not documented", op.OperationID, code)
	var ref struct {
		Ref    string `json:"$ref"`
		Schema struct {
			Ref string `json:"$ref"`
		} `json:"schema"`
	}
	require.NoError(t, json.Unmarshal(raw, &ref))
	if name, ok := strings.CutPrefix(ref.Ref, "#/responses/"); ok {
		require.Contains(t, doc.Responses, name)
		require.NoError(t, json.Unmarshal(doc.Responses[name], &ref))
	}
	name, ok := strings.CutPrefix(ref.Schema.Ref, "#/definitions/")
	require.True(t, ok, "%s: %d has a schema: %s", op.OperationID, code, raw)
	def, ok := doc.Definitions[name]
	require.True(t, ok, "%s is defined", name)
	return name, def
}

// requireErrorBody checks an error answer against the document: the
// status is documented for op, and the body has the properties of the
// definition documented for it only, of their types, and its required
// ones. It returns the body.
func requireErrorBody(t *testing.T, doc apiDoc, op apiOp, code int, body []byte) map[string]any {
	t.Helper()
	_, documented := op.Responses[strconv.Itoa(code)]
	require.True(t, documented, "%s answered %d, which its document does not list: %s", op.OperationID, code, body)
	name, def := doc.schemaOf(t, op, code)
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m), "%s", body)
	for k, v := range m {
		p, ok := def.Properties[k]
		require.True(t, ok, "%s: error body key %q is not in the document's %s: %s", op.OperationID, k, name, body)
		switch p.Type {
		case "integer":
			_, isNum := v.(float64)
			require.True(t, isNum, "%s: %v", k, v)
		case "string":
			s, isStr := v.(string)
			require.True(t, isStr, "%s: %v", k, v)
			if len(p.Enum) > 0 {
				require.Contains(t, p.Enum, s, k)
			}
		case "object":
			_, isObj := v.(map[string]any)
			require.True(t, isObj, "%s: %v", k, v)
		}
	}
	for _, k := range def.Required {
		require.Contains(t, m, k, "%s: required %q: %s", name, k, body)
	}
	if name == "Error" {
		require.Equal(t, float64(code), m["code"])
	}
	return m
}

// routingError reports whether an answer is the router's own: no route
// for the URL or the method (the gateway's routingError), which a
// documented operation must never get.
func routingError(code int, body []byte) bool {
	var m struct{ Message string }
	_ = json.Unmarshal(body, &m)
	return (code == 404 || code == 405 || code == 501) && strings.HasPrefix(m.Message, "no route for ")
}

// templateVar is a route variable, in the router's template ({name=*})
// or the document's ({name}).
var templateVar = regexp.MustCompile(`^\{[^}]*\}$`)

// sameRoute reports whether the router's template (the audit line's
// route, with the protos' field names) is the document's path (JSON
// names): the same literals, variables in the same places.
func sameRoute(template, path string) bool {
	a, b := strings.Split(template, "/"), strings.Split(path, "/")
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		va, vb := templateVar.MatchString(a[i]), templateVar.MatchString(b[i])
		if va != vb || (!va && a[i] != b[i]) {
			return false
		}
	}
	return true
}

// auditLines are the program's audit lines by request id.
func auditLines(t *testing.T, logs string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil || m["logger"] != "dcm.audit" {
			continue
		}
		if id, _ := m["request_id"].(string); id != "" {
			out[id] = m
		}
	}
	return out
}

// send sends one request with a request id as c (token: a bearer token, or none).
func send(t *testing.T, c *http.Client, token, id, method, url, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// TestOpenAPIAgainstServer checks the served document against the whole
// program: every operation it lists is routed to that route (the
// router's template, from the audit line of a call refused by role) and
// RPC (from the audit line of the admin's call, for every call that
// leaves one: all but successful reads), and every answer the admin got
// is a status the operation documents; then one call of each kind
// answers the success status documented (create 201, read 200, delete
// 204, apply 202) and errors produced for real (400, 401, 404, 409) are
// documented with the body they have.
func TestOpenAPIAgainstServer(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	s := stacktest.StartWith(t, stacktest.Options{Logs: logs})
	doc := readDoc(t, s)
	require.Equal(t, "2.0", doc.Swagger)
	require.Equal(t, "DCM REST API", doc.Info.Title)
	require.NotEmpty(t, doc.Info.Version)
	require.NotEqual(t, "version not set", doc.Info.Version)
	bearer, ok := doc.SecurityDefinitions["bearer"]
	require.True(t, ok, "a bearer security definition")
	require.Equal(t, "Authorization", bearer.Name)
	require.Contains(t, bearer.Description, "mutual TLS")
	require.Equal(t, []map[string][]string{{"bearer": {}}}, doc.Security)

	svcCert := s.Issue(t, pki.Identity{Subject: "svc", Role: pki.RoleService}, time.Now().Add(time.Hour))
	svc := s.Client(&svcCert)
	type sent struct {
		verb, path string
		op         apiOp
		code       int
		body       []byte
	}
	var admin, refused = map[string]sent{}, map[string]sent{}
	paths := make([]string, 0, len(doc.Paths))
	for p := range doc.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	fill := regexp.MustCompile(`\{[^}]*\}`)
	n := 0
	for _, p := range paths {
		url := s.URL + fill.ReplaceAllString(p, "oa-none")
		for verb, op := range doc.Paths[p] {
			n++
			body := ""
			if verb == "post" || verb == "put" {
				body = "{}"
			}
			method := strings.ToUpper(verb)
			// Refused by role: routed, and audited with the route matched.
			id := fmt.Sprintf("oa-svc-%d", n)
			code, b := send(t, svc, "", id, method, url, body)
			require.Equal(t, 403, code, "%s %s as a service certificate: %s", method, p, b)
			refused[id] = sent{verb, p, op, code, b}
			// As the admin: whatever the service answers, documented.
			id = fmt.Sprintf("oa-admin-%d", n)
			code, b = send(t, s.Admin, "", id, method, url, body)
			require.False(t, routingError(code, b), "%s %s is in the document but not routed: %d %s", method, p, code, b)
			if code >= 400 {
				requireErrorBody(t, doc, op, code, b)
			} else {
				require.Equal(t, op.success(t), code, "%s %s (%s)", method, p, op.OperationID)
			}
			admin[id] = sent{verb, p, op, code, b}
		}
	}
	// The audit lines of every refused call (each call leaves its line
	// before its answer ends; polled all the same, the log being the
	// program's).
	var lines map[string]map[string]any
	require.Eventually(t, func() bool {
		lines = auditLines(t, logs.String())
		for id := range refused {
			if _, ok := lines[id]; !ok {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond, "every refused call is audited")
	for id, c := range refused {
		a, ok := lines[id]
		require.True(t, ok, "no audit line for %s %s", c.verb, c.path)
		require.Equal(t, "forbidden", a["result"], "%s %s", c.verb, c.path)
		route, _ := a["route"].(string)
		require.True(t, sameRoute(route, c.path), "%s %s was routed to %s", c.verb, c.path, route)
	}
	checked := 0
	for id, c := range admin {
		a, ok := lines[id]
		if !ok {
			require.Less(t, c.code, 400, "%s %s failed without an audit line", c.verb, c.path)
			require.Equal(t, "get", c.verb, "%s %s: every write is audited", c.verb, c.path)
			continue
		}
		rpc, _ := a["rpc"].(string)
		require.Equal(t, c.op.rpc(), rpc[strings.LastIndex(rpc, "/")+1:], "%s %s (%s) called %s", c.verb, c.path, c.op.OperationID, rpc)
		checked++
	}
	require.Greater(t, checked, n*9/10, "the RPC of nearly every operation is checked")
	t.Logf("%d operations routed as documented; the RPC of %d checked", n, checked)

	// One call of each kind answers the status documented, with real
	// records; errors of a few operations, for real.
	r := apitest.NewREST(t, s)
	op := func(verb, path string) apiOp {
		o, ok := doc.Paths[path][verb]
		require.True(t, ok, "%s %s is documented", verb, path)
		return o
	}
	projects := op("post", "/v2/projects")
	r.Want(projects.success(t), "POST", "/v2/projects", `{"metadata":{"name":"oa"}}`)
	require.Equal(t, 201, projects.success(t))
	r.Want(op("get", "/v2/projects/{project}").success(t), "GET", "/v2/projects/oa", "")
	registerClusters(t, s, r)
	lcs := "/v2/projects/oa/logical-clouds"
	r.Want(op("post", "/v2/projects/{project}/logical-clouds").success(t), "POST", lcs, `{"metadata":{"name":"lc"}}`)
	r.Want(op("post", "/v2/projects/{project}/logical-clouds/{logical-cloud}/cluster-references").success(t),
		"POST", lcs+"/lc/cluster-references", `{"cluster-provider":"edge","cluster-name":"c1"}`)
	apply := op("post", "/v2/projects/{project}/logical-clouds/{logical-cloud}/apply")
	require.Equal(t, 202, apply.success(t))
	r.Want(apply.success(t), "POST", lcs+"/lc/apply", "")
	del := op("delete", "/v2/cluster-providers/{provider}/clusters/{name}")
	require.Equal(t, 204, del.success(t))
	require.Empty(t, r.Want(del.success(t), "DELETE", "/v2/cluster-providers/edge/clusters/c3", ""))

	code, b := apitest.Call(t, s.Admin, "POST", s.URL+"/v2/projects", `{"metadata":{"name":"oa2"},"no-such-key":1}`)
	require.Equal(t, "no-such-key", requireErrorBody(t, doc, projects, code, b)["field"])
	require.Equal(t, 400, code)
	code, b = apitest.Call(t, s.Admin, "POST", s.URL+"/v2/projects", `{"metadata":{"name":"oa"}}`)
	require.Equal(t, 409, code)
	requireErrorBody(t, doc, projects, code, b)
	code, b = apitest.Call(t, s.Admin, "GET", s.URL+"/v2/projects/oa-missing", "")
	require.Equal(t, 404, code)
	requireErrorBody(t, doc, op("get", "/v2/projects/{project}"), code, b)
	code, b = do(t, s.Client(nil), "", "GET", s.URL+"/v2/projects", "")
	require.Equal(t, 401, code)
	requireErrorBody(t, doc, op("get", "/v2/projects"), code, b)
	require.Contains(t, string(doc.Responses["401"]), "WWW-Authenticate")
}

// TestOpenAPIWithoutCredential: the document and its page are served to
// anyone, over the same HTTPS, with no credential and whatever credential
// (a bad token is not even looked at); the page loads only what this
// server serves, under a Content-Security-Policy; and a client address
// the failed-authentication limiter refuses still gets them.
func TestOpenAPIWithoutCredential(t *testing.T) {
	t.Parallel()
	s := stacktest.StartWith(t, stacktest.Options{Args: []string{"-auth-failure-burst", "2", "-auth-failure-refill", "1h"}})
	bare := s.Client(nil)
	require.True(t, strings.HasPrefix(s.URL, "https://"))
	get := func(path, token string) (*http.Response, []byte) {
		req, err := http.NewRequest("GET", s.URL+path, nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := bare.Do(req)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	for _, token := range []string{"", "not-a-token"} {
		resp, b := get("/openapi.json", token)
		require.Equal(t, 200, resp.StatusCode, "%s", b)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.True(t, json.Valid(b))
	}
	resp, page := get("/docs", "")
	require.Equal(t, 200, resp.StatusCode, "%s", page)
	require.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	csp := resp.Header.Get("Content-Security-Policy")
	require.Contains(t, csp, "default-src 'none'")
	require.Contains(t, csp, "script-src 'self';")
	require.NotContains(t, string(page), "://", "the page names no other host")
	refs := regexp.MustCompile(`(?i)\b(?:src|href|spec-url)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(string(page), -1)
	var locals []string
	for _, m := range refs {
		ref := m[1]
		require.True(t, strings.HasPrefix(ref, "/") && !strings.HasPrefix(ref, "//"), "the page refers to %q: only this server's paths", ref)
		locals = append(locals, ref)
	}
	require.Contains(t, locals, "/openapi.json")
	scripts := 0
	for _, ref := range locals {
		resp, b := get(ref, "")
		require.Equal(t, 200, resp.StatusCode, "%s: %s", ref, b)
		if strings.HasSuffix(ref, ".js") {
			scripts++
			require.Less(t, len(b), 2<<20, "%s stays under 2 MB", ref)
			require.Equal(t, csp, resp.Header.Get("Content-Security-Policy"))
		}
	}
	require.Equal(t, 1, scripts, "the page loads its viewer: %v", locals)

	// Fail authentication until the address is refused (429): the
	// document and the page are still served to it.
	require.Eventually(t, func() bool {
		r, _ := get("/v2/projects", "not-a-token")
		return r.StatusCode == 429
	}, 20*time.Second, 10*time.Millisecond)
	for _, path := range []string{"/openapi.json", "/docs"} {
		r, b := get(path, "")
		require.Equal(t, 200, r.StatusCode, "%s: %s", path, b)
	}
	require.True(t, slices.ContainsFunc(locals, func(s string) bool { return strings.HasPrefix(s, "/docs/") }))
}
