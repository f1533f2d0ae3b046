package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const tgPath = "/v2/projects/p/rb/bookinfo/v1/traffic-intent-groups/g"

// tgServer answers a traffic intent group's routes: each POST with the
// status in state post, the 409 of the core to a resume, and GET
// .../status with the states of gets in turn (the last one again after).
type tgServer struct {
	mu    sync.Mutex
	calls []string
	gets  []string
	n     int
}

func (s *tgServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Dcm-Dialect"))
	if !strings.HasPrefix(r.URL.Path, tgPath+"/") {
		http.NotFound(w, r)
		return
	}
	state := "Applying"
	switch verb := strings.TrimPrefix(r.URL.Path, tgPath+"/"); {
	case r.Method == "POST" && verb == "resume":
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"code":409,"status":"FailedPrecondition","message":"traffic intent group \"g\" is Applied: resume needs it to be Paused","reason":"WRONG_STATE"}`))
		return
	case r.Method == "POST" && verb == "terminate":
		state = "Terminating"
	case r.Method == "GET" && verb == "status":
		state = s.gets[min(s.n, len(s.gets)-1)]
		s.n++
	case r.Method != "POST":
		http.NotFound(w, r)
		return
	}
	rollout := ""
	if state == "Paused" {
		rollout = `,"rollout":{"strategy":{"strategy":"progressive","max-concurrency":"1","max-failures":0,"soak":"0s"},` +
			`"wave":1,"admitted":1,"total":3,"paused":true,"failed":["edge/c1"],"rollback-available":true}`
	}
	say(w, `{"project":"p","rb":"bookinfo","version":"v1","group":"g","logical-cloud":"lc","state":%q,"ready":1,"total":3,`+
		`"clusters":[{"cluster-provider":"edge","cluster-name":"c1","state":"failed","ready":0,"total":2,"last-error":"no route"},`+
		`{"cluster-provider":"edge","cluster-name":"c2","state":"applied","ready":1,"total":1}]%s}`, state, rollout)
}

// tgRun runs dcmctl with args against srv and returns its output and the
// exit code (0: no error, 1: an error or exitError{1}) and the error.
func tgRun(t *testing.T, srv *httptest.Server, args ...string) (string, int, error) {
	t.Helper()
	path := anonymousConfig(t, srv.URL)
	var out strings.Builder
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(append([]string{"--config", path}, args...))
	err := root.Execute()
	code := 0
	if ee, ok := err.(exitError); ok {
		code = ee.code
	} else if err != nil {
		code = 1
	}
	return out.String(), code, err
}

// anonymousConfig is a config file whose context is server without a
// credential.
func anonymousConfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	c := &Config{CurrentContext: "anonymous", Contexts: map[string]*Context{"anonymous": {Server: server}}}
	if err := c.save(path); err != nil {
		t.Fatal(err)
	}
	return path
}

var tgURL = []string{"-p", "p", "--app", "bookinfo", "--version", "v1"}

// TestTrafficGroupVerbs: each traffic-group verb POSTs to the group's route
// of the core's contract and prints the group's state; a verb in the wrong
// state prints the core's 409 message. (Before, dcmctl had no traffic-group
// command.)
func TestTrafficGroupVerbs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		call string
		want string
	}{
		{[]string{"apply", "g"}, "POST " + tgPath + "/apply dcm", "p/bookinfo/v1/g: Applying 1/3\n"},
		{[]string{"update", "g"}, "POST " + tgPath + "/update dcm", "p/bookinfo/v1/g: Applying 1/3\n"},
		{[]string{"rollback", "g"}, "POST " + tgPath + "/rollback dcm", "p/bookinfo/v1/g: Applying 1/3\n"},
		{[]string{"terminate", "g", "--force"}, "POST " + tgPath + "/terminate?force=true dcm", "p/bookinfo/v1/g: Terminating 1/3\n"},
		{[]string{"apply", "g", "--composite-app", "bookinfo", "--app-version", "v1"}, "POST " + tgPath + "/apply dcm", "p/bookinfo/v1/g: Applying 1/3\n"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			s := &tgServer{}
			srv := httptest.NewServer(s)
			defer srv.Close()
			args := append([]string{"traffic-group"}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "--app-version") {
				args = append(args, tgURL...)
			} else {
				args = append(args, "-p", "p")
			}
			out, code, err := tgRun(t, srv, args...)
			if code != 0 || out != tc.want {
				t.Fatalf("exit %d (%v), output %q, want %q", code, err, out, tc.want)
			}
			if len(s.calls) != 1 || s.calls[0] != tc.call {
				t.Fatalf("calls %q, want %q", s.calls, tc.call)
			}
		})
	}

	s := &tgServer{}
	srv := httptest.NewServer(s)
	defer srv.Close()
	_, code, err := tgRun(t, srv, append([]string{"tg", "resume", "g"}, tgURL...)...)
	if want := `FailedPrecondition: traffic intent group "g" is Applied: resume needs it to be Paused (WRONG_STATE) [HTTP 409]`; code != 1 || err == nil || err.Error() != want {
		t.Fatalf("resume in the wrong state: exit %d, %v; want %s", code, err, want)
	}
	for _, missing := range []struct{ args, err string }{
		{"-p p --version v1", "--app"}, {"-p p --app bookinfo", "--version"}, {"--app bookinfo --version v1", "-p"},
	} {
		_, code, err := tgRun(t, srv, append([]string{"traffic-group", "apply", "g"}, strings.Fields(missing.args)...)...)
		if code != 1 || err == nil || !strings.Contains(err.Error(), missing.err) {
			t.Errorf("%s: exit %d, %v; want an error naming %s", missing.args, code, err, missing.err)
		}
	}
	if len(s.calls) != 1 {
		t.Errorf("an incomplete group URL was sent: %q", s.calls)
	}
}

// TestTrafficGroupStatus: status shows the group's state, ready/total, the
// rollout wave as a logical cloud's status shows it, and each cluster.
func TestTrafficGroupStatus(t *testing.T) {
	s := &tgServer{gets: []string{"Paused"}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	out, code, err := tgRun(t, srv, append([]string{"traffic-group", "status", "g"}, tgURL...)...)
	want := "p/bookinfo/v1/g: Paused 1/3\n" +
		"rollout: wave 1, 1 of 3 clusters reached (1 at a time, max failures 0, soak 0s); failed: edge/c1; paused: resume or rollback\n" +
		"  edge/c1 0/2 failed\n    last error: no route\n  edge/c2 1/1 applied\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d (%v), output\n%s\nwant\n%s", code, err, out, want)
	}
	if s.calls[0] != "GET "+tgPath+"/status dcm" {
		t.Fatalf("calls %q", s.calls)
	}
}

// TestTrafficGroupWatch: status --watch reads the status until the group
// settles (or --timeout passes) and says how it ended in its exit code.
func TestTrafficGroupWatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gets  []string
		code  int
		reads int
		last  string
	}{
		{"applied", []string{"Applying", "Applying", "Applied"}, 0, 3, "p/bookinfo/v1/g: Applied 1/3\n"},
		{"paused", []string{"Applying", "Paused"}, 1, 2, "g paused: too many clusters failed; resume or rollback\n"},
		{"failed", []string{"Terminating", "TerminateFailed"}, 1, 2, "g failed\n"},
		{"terminated", []string{"Terminating", "Terminated"}, 0, 2, "p/bookinfo/v1/g: Terminated 1/3\n"},
		{"never applied", []string{"Created"}, 1, 1, "g is not applied\n"},
		{"timeout", []string{"Applying"}, 1, -1, "gave up: the group did not settle in time\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &tgServer{gets: tc.gets}
			srv := httptest.NewServer(s)
			defer srv.Close()
			timeout := "1m"
			if tc.reads < 0 {
				timeout = "100ms"
			}
			out, code, err := tgRun(t, srv, append([]string{"traffic-group", "status", "g", "--watch", "--interval", "5ms", "--timeout", timeout}, tgURL...)...)
			ended := strings.HasSuffix(out, tc.last) // the verdict of a watch that did not end well
			if tc.code == 0 {
				ended = strings.HasSuffix(out, tc.last+"  edge/c1 0/2 failed\n    last error: no route\n  edge/c2 1/1 applied\n")
			}
			if code != tc.code || !ended {
				t.Fatalf("exit %d (%v), want %d; output:\n%s", code, err, tc.code, out)
			}
			if tc.reads > 0 && s.n != tc.reads {
				t.Errorf("%d reads, want %d", s.n, tc.reads)
			}
			// not a terminal: a view is printed when it changed
			if views := strings.Count(out, "p/bookinfo/v1/g: "); views != len(dedup(tc.gets)) {
				t.Errorf("%d views, want %d:\n%s", views, len(dedup(tc.gets)), out)
			}
		})
	}
}

func dedup(states []string) []string {
	var out []string
	for _, s := range states {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

func TestTrafficGroupHelp(t *testing.T) {
	for _, verb := range []string{"apply", "update", "resume", "rollback", "terminate", "status"} {
		var out strings.Builder
		root := newRoot()
		root.SetArgs([]string{"traffic-group", verb, "--help"})
		root.SetOut(&out)
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), fmt.Sprintf("Examples:\n  dcmctl traffic-group %s g -p proj1 --app bookinfo --version v1", verb)) {
			t.Errorf("%s has no example:\n%s", verb, out.String())
		}
	}
}
