package main

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProxyListensOnLoopbackOnly(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8081": "127.0.0.1:8081", "localhost:0": "127.0.0.1:0", "LocalHost:9077": "127.0.0.1:9077",
		"[::1]:8081": "[::1]:8081", "127.0.0.2:80": "127.0.0.2:80",
	} {
		got, err := loopbackListen(addr)
		if err != nil || got != want {
			t.Errorf("loopbackListen(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	for _, addr := range []string{":8081", "0.0.0.0:8081", "[::]:8081", "192.0.2.1:8081", "example.com:8081", "127.0.0.1", "localhost.example.com:1"} {
		if got, err := loopbackListen(addr); err == nil {
			t.Errorf("loopbackListen(%q) = %q: a non-loopback address was accepted", addr, got)
		}
	}
}

// TestProxyForwards: the proxy sends each request to the server over TLS
// (verified with the context's CA) under the server's path, with the
// request's escaped path, query and body as they are, and adds the
// context's token only where the request has no Authorization header.
func TestProxyForwards(t *testing.T) {
	type seen struct{ host, uri, auth, body string }
	got := make(chan seen, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Host, r.RequestURI, r.Header.Get("Authorization"), string(b)}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.crt")
	pemCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemCA, 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := newProxy(&Context{Server: srv.URL + "/dcm/", CA: ca, Token: "dcm_0123456789abcdef_proxy"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(h)
	defer front.Close()
	send := func(auth string) seen {
		req, _ := http.NewRequest("POST", front.URL+"/v2/projects/p%2Fq/status?status=ready&type=rsync", strings.NewReader(`{"a":1}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted || string(b) != `{"ok":true}` {
			t.Fatalf("answer %d %s, want the server's 202", resp.StatusCode, b)
		}
		return <-got
	}
	want := seen{strings.TrimPrefix(srv.URL, "https://"), "/dcm/v2/projects/p%2Fq/status?status=ready&type=rsync", "Bearer dcm_0123456789abcdef_proxy", `{"a":1}`}
	if s := send(""); s != want {
		t.Errorf("the server saw %+v, want %+v", s, want)
	}
	want.auth = "Bearer own"
	if s := send("Bearer own"); s != want {
		t.Errorf("with the request's own token the server saw %+v, want %+v", s, want)
	}

	// Without the CA that signed it (the system's roots) the server is
	// not trusted: 502, and the request is not sent.
	h, err = newProxy(&Context{Server: srv.URL, Token: "dcm_0123456789abcdef_proxy"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v2/projects", nil))
	if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), "certificate") {
		t.Errorf("an unverified server: %d %s", rec.Code, rec.Body)
	}

	if _, err := newProxy(&Context{Server: "http://127.0.0.1:8080"}, io.Discard); err == nil {
		t.Error("an http:// server was accepted: the proxy is there to speak TLS")
	}
}
