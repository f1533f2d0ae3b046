package main

import (
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
	for _, args := range [][]string{{"--help"}, {"apply", "--help"}, {"logical-cloud", "status", "--help"}, {"token", "create", "--help"}} {
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
			err = watchStatus(c, "/v2/projects/p/logical-clouds/lc", &out, tc.tty)
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
