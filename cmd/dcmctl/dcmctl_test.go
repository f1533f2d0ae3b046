package main

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestChanges(t *testing.T) {
	for _, tc := range []struct {
		name           string
		wanted, actual any
		want           []string
	}{
		{"equal", map[string]any{"a": "x"}, map[string]any{"a": "x", "extra": 1.0}, nil},
		{"changed", map[string]any{"a": "x"}, map[string]any{"a": "y"}, []string{`a: "y" -> "x"`}},
		{"number as string", map[string]any{"port": "80"}, map[string]any{"port": 80.0}, nil},
		{"flag as string", map[string]any{"tls": "true"}, map[string]any{"tls": true}, nil},
		{"empty is absent", map[string]any{"ip": "", "l": []any{}}, map[string]any{}, nil},
		{"list length", map[string]any{"l": []any{"a"}}, map[string]any{"l": []any{"a", "b"}}, []string{`l: ["a","b"] -> ["a"]`}},
		{"nested", map[string]any{"m": map[string]any{"k": "v"}}, map[string]any{"m": map[string]any{"k": "w"}}, []string{`m.k: "w" -> "v"`}},
		{"missing", map[string]any{"a": "x"}, map[string]any{}, []string{`a: (none) -> "x"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range changes("", tc.wanted, tc.actual) {
				got = append(got, c.String())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("changes = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestQuantityChanges(t *testing.T) {
	w := map[string]any{"cpu": "2000m", "pods": 10.0}
	if ch := quantityChanges("spec", w, map[string]any{"cpu": "2", "pods": "10"}); len(ch) != 0 {
		t.Fatalf("canonical quantities differ: %v", ch)
	}
	if ch := quantityChanges("spec", w, map[string]any{"cpu": "3", "pods": "10"}); len(ch) != 1 || ch[0].Path != "spec.cpu" {
		t.Fatalf("changes = %v, want spec.cpu", ch)
	}
	if ch := quantityChanges("spec", w, map[string]any{"cpu": "2", "pods": "10", "memory": "1Gi"}); len(ch) != 1 {
		t.Fatalf("a quota key the file does not have is a change: %v", ch)
	}
}

func TestReadDocuments(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kc.yaml"), []byte("kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "f.yaml")
	if err := os.WriteFile(f, []byte(`# only a comment
---
kind: KVPair
project: p
logicalCloud: lc
metadata: {name: kv}
spec: {kv: [{a: b}]}
---
kind: cluster
provider: edge
kubeconfigFile: kc.yaml
body: {metadata: {name: c1}}
---
kind: LogicalCloud
project: p
name: lc
cluster-labels: edge
---
kind: Project
metadata: {name: p}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	docs, err := readDocuments([]string{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		got = append(got, d.label())
	}
	if want := "Project/p Cluster/c1 LogicalCloud/lc KVPair/kv"; strings.Join(got, " ") != want {
		t.Fatalf("order = %q, want %q", got, want)
	}
	if docs[1].kubeconfig != "kubeconfig" || docs[1].parents["provider"] != "edge" {
		t.Fatalf("cluster = %+v", docs[1])
	}
	if _, ok := docs[3].body["project"]; ok {
		t.Fatal("the parent key stays in the body")
	}
	path, _, err := docs[3].paths()
	if err != nil || path != "/v2/projects/p/logical-clouds/lc/kv-pairs" {
		t.Fatalf("path = %q, %v", path, err)
	}

	for _, tc := range []struct{ doc, err string }{
		{"kind: Nope\nmetadata: {name: x}", `unknown kind "Nope"`},
		{"metadata: {name: x}", "no kind"},
		{"kind: ClusterQuota\nproject: p\nmetadata: {name: q}", `needs "logicalCloud"`},
		{"kind: Project\nspec: {}", "has no name"},
		{"kind: Project\nbody: {metadata: {name: p}}\nextra: 1", "holds only kind"},
		{"version: emco/v1\nresourceContext: {anchor: projects}", "only emco/v2"},
		{"version: emco/v2\nresourceContext: {anchor: projects}\nmetadata: {name: p}\nwhat: 1", `unknown key "what"`},
	} {
		if _, err := readDocuments([]string{"-"}, strings.NewReader(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.doc, err, tc.err)
		}
	}
}

func TestEMCODocumentsKeepTheirOrder(t *testing.T) {
	in := `version: emco/v2
resourceContext: {anchor: projects/p/logical-clouds/lc/instantiate}
---
kind: Project
metadata: {name: p}
---
version: emco/v2
resourceContext: {anchor: /projects/}
metadata: {name: p}
`
	docs, err := readDocuments([]string{"-"}, strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 3 || docs[0].verb() != "instantiate" || docs[1].kind.Name != "Project" || docs[2].label() != "projects/p" {
		t.Fatalf("docs = %+v", docs)
	}
}

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "config.yaml")
	c := &Config{CurrentContext: "a", Contexts: map[string]*Context{
		"a": {Server: "https://a", Token: "t"}, "b": {Server: "https://b", Cert: "c", Key: "k"}}}
	if err := c.save(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file mode %v, %v; want 0600", fi.Mode(), err)
	}
	g := &globals{config: path}
	if ctx, err := g.current(); err != nil || ctx.Server != "https://a" {
		t.Fatalf("current = %+v, %v", ctx, err)
	}
	g.context = "b"
	if ctx, err := g.current(); err != nil || ctx.Key != "k" {
		t.Fatalf("--context b = %+v, %v", ctx, err)
	}
	g.context = "c"
	if _, err := g.current(); err == nil || !strings.Contains(err.Error(), "have: a, b") {
		t.Fatalf("unknown context: %v", err)
	}
}

func TestRender(t *testing.T) {
	s := &lcStatus{Project: "p", LogicalCloud: "lc", State: "Instantiating", Ready: 3, Total: 10}
	s.Clusters = append(s.Clusters, struct {
		Provider  string `json:"cluster-provider"`
		Name      string `json:"cluster-name"`
		State     string `json:"state"`
		Ready     int    `json:"ready"`
		Total     int    `json:"total"`
		LastError string `json:"last-error"`
	}{"edge", "c1", "retrying", 1, 4, "connection\nrefused"})
	want := "p/lc: Instantiating 3/10\n  edge/c1 [#####---------------] 1/4 retrying\n    last error: connection refused\n"
	if got := render(s, true); got != want {
		t.Fatalf("render =\n%s\nwant\n%s", got, want)
	}
	if got := render(s, false); strings.Contains(got, "[") {
		t.Fatalf("plain render has a bar:\n%s", got)
	}
}

// status shows a progressive rollout's wave, read from the gateway's JSON.
func TestRenderRolloutWave(t *testing.T) {
	var s lcStatus
	err := json.Unmarshal([]byte(`{"project": "p", "logical-cloud": "lc", "state": "Paused", "ready": 10, "total": 12,
		"rollout": {"strategy": {"strategy": "progressive", "max-concurrency": "2", "max-failures": 0, "soak": "30s"},
		"wave": 2, "admitted": 4, "total": 6, "paused": true, "failed": ["edge/c2"], "rollback-available": true}}`), &s)
	if err != nil {
		t.Fatal(err)
	}
	want := "p/lc: Paused 10/12\nrollout: wave 2, 4 of 6 clusters reached (2 at a time, max failures 0, soak 30s); failed: edge/c2; paused: resume or rollback\n"
	if got := render(&s, false); got != want {
		t.Fatalf("render =\n%s\nwant\n%s", got, want)
	}
}

func TestErrorOf(t *testing.T) {
	e := errorOf(409, []byte(`{"code":409,"status":"FailedPrecondition","message":"logical cloud \"lc\" is Instantiating","reason":"WRONG_STATE"}`))
	if got := e.Error(); got != `FailedPrecondition: logical cloud "lc" is Instantiating (WRONG_STATE) [HTTP 409]` {
		t.Fatal(got)
	}
	if got := errorOf(502, []byte("bad\ngateway")).Error(); oneLine(got) != "bad gateway [HTTP 502]" {
		t.Fatal(got)
	}
}

func TestHelpAndCompletion(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"apply", "--help"}, {"logical-cloud", "status", "--help"}, {"token", "create", "--help"}, {"proxy", "--help"}} {
		var out strings.Builder
		root := newRoot()
		root.SetArgs(args)
		root.SetOut(&out)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(out.String(), "Examples:\n  dcmctl ") {
			t.Errorf("%v has no examples:\n%s", args, out.String())
		}
	}
	for _, shell := range []string{"bash", "zsh"} {
		var out strings.Builder
		root := newRoot()
		root.SetArgs([]string{"completion", shell})
		root.SetOut(&out)
		if err := root.Execute(); err != nil || !strings.Contains(out.String(), "dcmctl") {
			t.Errorf("completion %s: %v\n%.200s", shell, err, out.String())
		}
	}
	// Kinds complete from the table.
	root := newRoot()
	var out strings.Builder
	root.SetArgs([]string{"__complete", "get", ""})
	root.SetOut(&out)
	if err := root.Execute(); err != nil || !strings.Contains(out.String(), "logical-clouds\n") {
		t.Errorf("kind completion: %v\n%s", err, out.String())
	}
}

// TestWatchOutcome reads watch streams as the gateway writes them (one
// {"result": status} per line) and checks the exit code and the redraws.
func TestWatchOutcome(t *testing.T) {
	for _, tc := range []struct {
		name   string
		states []string
		tty    bool
		code   int // 0: nil error
		want   []string
	}{
		{"instantiated", []string{"Instantiating", "Instantiated"}, false, 0,
			[]string{"p/lc: Instantiating 0/1\n", "p/lc: Instantiated 0/1\n"}},
		{"failed", []string{"Instantiating", "InstantiateFailed"}, false, 1, []string{"lc failed\n"}},
		{"unsettled", []string{"Terminating"}, false, 1, []string{"lc did not settle: Terminating\n"}},
		{"terminal redraws", []string{"Terminating", "Terminated"}, true, 0,
			[]string{"\x1b[2A\x1b[Jp/lc: Terminated 0/1\n  e/c [--------------------] 0/1 deleted\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v2/projects/p/logical-clouds/lc/status" || r.URL.Query().Get("watch") != "true" {
					http.NotFound(w, r)
					return
				}
				for _, s := range tc.states {
					cs := "pending"
					if strings.HasPrefix(s, "Term") {
						cs = "deleted"
					}
					say(w, `{"result":{"project":"p","logical-cloud":"lc","state":%q,"ready":0,"total":1,`+
						`"clusters":[{"cluster-provider":"e","cluster-name":"c","state":%q,"ready":0,"total":1}]}}`+"\n", s, cs)
				}
			}))
			defer srv.Close()
			c, err := newClient(&Context{Server: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			err = watchStatus(c, "/v2/projects/p/logical-clouds/lc/status", &out, tc.tty)
			code := 0
			if ee, ok := err.(exitError); ok {
				code = ee.code
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", code, tc.code, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output has no %q:\n%q", w, out.String())
				}
			}
		})
	}
}

// TestDocumentFilesStayUnderTheirDirectory: a Cluster's kubeconfigFile
// (and an emcoctl document's file) is read only from under the document's
// directory: an absolute path, a path with "..", or a symbolic link that
// points out of it is refused, so applying a document from elsewhere
// cannot send the operator's own files (~/.kube/config, keys) to the
// server. (Before, each was read and sent.)
func TestDocumentFilesStayUnderTheirDirectory(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "docs")
	secret := filepath.Join(top, "secret.kubeconfig")
	for p, b := range map[string]string{secret: "operator's own", filepath.Join(dir, "kc", "c1.kubeconfig"): "cluster 1"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(dir, "out.kubeconfig")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "kc", "c1.kubeconfig"), filepath.Join(dir, "in.kubeconfig")); err != nil {
		t.Fatal(err)
	}
	read := func(doc string) (*document, error) {
		f := filepath.Join(dir, "f.yaml")
		if err := os.WriteFile(f, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		docs, err := readDocuments([]string{f}, nil)
		if err != nil {
			return nil, err
		}
		return docs[0], nil
	}
	cluster := "kind: Cluster\nprovider: e\nmetadata: {name: c1}\nkubeconfigFile: %s\n"
	emco := "version: emco/v2\nresourceContext: {anchor: cluster-providers/e/clusters}\nmetadata: {name: c1}\nfile: %s\n"
	for _, form := range []string{cluster, emco} {
		for _, ok := range []string{"kc/c1.kubeconfig", "in.kubeconfig", "./kc/../kc/c1.kubeconfig"} {
			d, err := read(fmt.Sprintf(form, ok))
			if err != nil || d.kubeconfig != "cluster 1" {
				t.Errorf("%s: %v, %+v", ok, err, d)
			}
		}
		for _, bad := range []string{secret, "../secret.kubeconfig", "kc/../../secret.kubeconfig", "out.kubeconfig"} {
			d, err := read(fmt.Sprintf(form, bad))
			if err == nil || !strings.Contains(err.Error(), "document's directory") {
				t.Errorf("%s: read %+v, error %v; want a refusal naming the document's directory", bad, d, err)
			}
		}
	}
}

// TestCredentialsOnlyOverHTTPS: dcmctl sends no credential to an http://
// server: a context with a token pointing at http:// fails before a
// request, and the server never sees the token. A context without a
// credential may still use http://. (Before, the token went in clear.)
func TestCredentialsOnlyOverHTTPS(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"projects":[]}`))
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "config.yaml")
	c := &Config{CurrentContext: "plain", Contexts: map[string]*Context{
		"plain": {Server: srv.URL, Token: "dcm_0123456789abcdef_secret"}, "anonymous": {Server: srv.URL}}}
	if err := c.save(path); err != nil {
		t.Fatal(err)
	}
	if code := run([]string{"--config", path, "get", "projects"}); code == 0 {
		t.Error("dcmctl used an http:// server with a token")
	}
	t.Setenv(tokenEnv, "dcm_0123456789abcdef_fromenv")
	if code := run([]string{"--config", path, "--context", "anonymous", "get", "projects"}); code == 0 {
		t.Error("dcmctl sent $DCMCTL_TOKEN to an http:// server")
	}
	for _, h := range seen {
		if h != "" {
			t.Errorf("the http:// server saw %q", h)
		}
	}
	t.Setenv(tokenEnv, "")
	if code := run([]string{"--config", path, "--context", "anonymous", "get", "projects"}); code != 0 {
		t.Error("no credential: http:// is allowed")
	}
	if _, err := newClient(&Context{Server: "ftp://x"}); err == nil {
		t.Error("ftp:// accepted")
	}
	_, err := newClient(&Context{Server: srv.URL, Cert: "c", Key: "k"})
	if err == nil || !strings.Contains(err.Error(), "https://") {
		t.Errorf("a client certificate over http://: %v", err)
	}
}

// TestTokenFromFileStdinOrEnvironment: login takes the token from a file,
// from stdin (--token-file -) or from $DCMCTL_TOKEN, so it never has to
// be on the command line (ps, shell history); every other command sends
// $DCMCTL_TOKEN instead of the context's credential when it is set.
func TestTokenFromFileStdinOrEnvironment(t *testing.T) {
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
		_, _ = w.Write([]byte(`{"projects":[]}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("dcm_file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config.yaml")
	login := func(stdin string, args ...string) {
		t.Helper()
		root := newRoot()
		root.SetIn(strings.NewReader(stdin))
		root.SetOut(io.Discard)
		root.SetArgs(append([]string{"--config", config, "login", "--server", srv.URL, "--ca", ca}, args...))
		if err := root.Execute(); err != nil {
			t.Fatalf("login %v: %v", args, err)
		}
	}
	stored := func(name string) string {
		t.Helper()
		c, err := loadConfig(config)
		if err != nil {
			t.Fatal(err)
		}
		return c.Contexts[name].Token
	}
	login("", "--name", "file", "--token-file", tokenFile)
	login("dcm_stdin\n", "--name", "stdin", "--token-file", "-")
	t.Setenv(tokenEnv, "dcm_env")
	login("", "--name", "env")
	for name, want := range map[string]string{"file": "dcm_file", "stdin": "dcm_stdin", "env": "dcm_env"} {
		if got := stored(name); got != want {
			t.Errorf("context %s: token %q, want %q", name, got, want)
		}
	}
	seen = nil
	if code := run([]string{"--config", config, "--context", "file", "get", "projects"}); code != 0 {
		t.Fatal("get failed")
	}
	if len(seen) == 0 || seen[0] != "Bearer dcm_env" {
		t.Errorf("$DCMCTL_TOKEN not sent: %q", seen)
	}
}

// TestSettledReadsTheProjectsStatus: an emcoctl instantiate of a logical
// cloud already instantiated is left alone also against a gateway that
// speaks EMCO by default, whose status in EMCO's shape has no state:
// dcmctl asks for the project's dialect. (Before, it sent no dialect, and
// the EMCO-shaped answer read as not settled.)
func TestSettledReadsTheProjectsStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Dcm-Dialect") == "dcm" {
			_, _ = w.Write([]byte(`{"state":"Instantiated"}`))
			return
		}
		_, _ = w.Write([]byte(`{"deployedStatus":"Instantiated","readyStatus":"Ready"}`))
	}))
	defer srv.Close()
	c, err := newClient(&Context{Server: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	settled, err := settledFor(c, &document{anchor: "projects/p1/logical-clouds/lc1/instantiate"}, "instantiate")
	if err != nil || !settled {
		t.Errorf("settled %v, %v: want true", settled, err)
	}
}

// TestGetClustersShowsHealth: get clusters shows each cluster's health
// state and last-seen, and --state asks the gateway for that state only.
func TestGetClustersShowsHealth(t *testing.T) {
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.Query().Get("state"))
		_, _ = w.Write([]byte(`[{"metadata":{"name":"c1"},"spec":{"labels":["edge"]},
 "status":{"server":"https://10.0.0.1:6443","state":"Unreachable","since":"2026-11-27T21:00:00Z","last-seen":"2026-11-27T20:59:30Z"}},
 {"metadata":{"name":"c2"},"status":{"state":"Unknown"}}]`))
	}))
	defer srv.Close()
	path := anonymousConfig(t, srv.URL)
	var out strings.Builder
	root := newRoot()
	root.SetOut(&out)
	root.SetArgs([]string{"--config", path, "get", "clusters", "--provider", "edge", "--state", "Unreachable"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME SERVER LABELS STATE LAST-SEEN" ||
		strings.Join(strings.Fields(lines[1]), " ") != "c1 https://10.0.0.1:6443 edge Unreachable 2026-11-27T20:59:30Z" ||
		strings.Join(strings.Fields(lines[2]), " ") != "c2 <none> <none> Unknown <none>" {
		t.Errorf("table:\n%s", out.String())
	}
	if len(queries) != 1 || queries[0] != "Unreachable" {
		t.Errorf("state asked: %q", queries)
	}
	root = newRoot()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"--config", path, "get", "projects", "--state", "Ready"})
	if err := root.Execute(); err == nil {
		t.Error("--state accepted for projects")
	}
}
