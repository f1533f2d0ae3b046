package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/store"
)

// project is the benchmark's project; the token is its project-admin's.
const project = "bench"

// client sends the benchmark's requests with a bearer token over HTTPS.
type client struct {
	http    *http.Client
	base    string
	token   string
	profile *profiler
}

// profiler writes a CPU profile to file: of every measurement, or, with
// only ("get/8": an operation and, optionally, its number of clients), of
// the first that matches.
type profiler struct {
	file         *os.File
	only         string
	active, done bool
}

func (p *profiler) start(what string, clients int) {
	if p.file == nil || p.done || p.active {
		return
	}
	// The operation's first word: "list of 1000" is list, "ceiling (GET,
	// no store)" is ceiling, as -profile-only names them.
	op, _, _ := strings.Cut(what, " ")
	if p.only != "" && !strings.HasPrefix(fmt.Sprintf("%s/%d", op, clients), p.only) {
		return
	}
	p.active = pprof.StartCPUProfile(p.file) == nil
}

func (p *profiler) stop() {
	if p.active && p.only != "" {
		pprof.StopCPUProfile()
		p.active, p.done = false, true
	}
}

// newClient creates the project (with the bootstrap admin token) and
// mints a project-admin token for it through the token service, so every
// measured request is authenticated as a tenant's would be.
func newClient(ctx context.Context, p *app.Program) (*client, error) {
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: p.Env.TLS.Pool(), MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 64,
	}
	c := &client{http: &http.Client{Transport: tr, Timeout: time.Minute}, base: "https://" + p.Server.HTTPAddr(), token: p.Env.AdminToken,
		profile: &profiler{}}
	if err := c.do(ctx, "POST", "/v2/projects", `{"metadata":{"name":"`+project+`"}}`, http.StatusCreated, nil); err != nil {
		return nil, fmt.Errorf("create the project: %w", err)
	}
	var tok struct {
		Token string `json:"token"`
	}
	body := `{"subject":"bench","role":"project-admin","project":"` + project + `","ttl":"24h"}`
	if err := c.do(ctx, "POST", "/v2/auth/tokens", body, http.StatusCreated, &tok); err != nil {
		return nil, fmt.Errorf("mint a token: %w", err)
	}
	c.token = tok.Token
	return c, nil
}

// do sends one request and fails unless it answers want; into, if not
// nil, receives the JSON answer.
func (c *client) do(ctx context.Context, method, path, body string, want int, into any) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, bytes.TrimSpace(b))
	}
	if into != nil {
		return json.Unmarshal(b, into)
	}
	return nil
}

const clouds = "/v2/projects/" + project + "/logical-clouds"

// create makes a logical cloud with one user and one quota (seed 002's
// flat body: "resources" is the logical cloud's quota).
func (c *client) create(ctx context.Context, name string) error {
	body := `{"name":"` + name + `","description":"benchmark",` +
		`"user":[{"name":"user-1","type":"certificate"}],"resources":{"cpu":"1","memory":"1Gi"}}`
	return c.do(ctx, "POST", clouds, body, http.StatusCreated, nil)
}

func (c *client) delete(ctx context.Context, name string) error {
	return c.do(ctx, "DELETE", clouds+"/"+name, "", http.StatusNoContent, nil)
}

func (c *client) get(name string) func(context.Context) error {
	return func(ctx context.Context) error { return c.do(ctx, "GET", clouds+"/"+name, "", http.StatusOK, nil) }
}

// list reads the whole collection in one page and checks it holds n.
func (c *client) list(n int) func(context.Context) error {
	return func(ctx context.Context) error {
		var got []json.RawMessage
		if err := c.do(ctx, "GET", fmt.Sprintf("%s?page-size=%d", clouds, n), "", http.StatusOK, &got); err != nil {
			return err
		}
		if len(got) != n {
			return fmt.Errorf("list: %d logical clouds, want %d", len(got), n)
		}
		return nil
	}
}

// each runs op once per name, the names shared among n clients.
func (c *client) each(what string, n int, names []string, op func(context.Context, string) error) (row, error) {
	next := make(chan string, len(names))
	for _, name := range names {
		next <- name
	}
	close(next)
	return c.measure(what, n, func(ctx context.Context) (bool, error) {
		name, ok := <-next
		if !ok {
			return false, nil
		}
		return true, op(ctx, name)
	})
}

// during runs op from n clients until d has passed.
func (c *client) during(what string, n int, d time.Duration, op func(context.Context) error) (row, error) {
	end := time.Now().Add(d)
	return c.measure(what, n, func(ctx context.Context) (bool, error) {
		if time.Now().After(end) {
			return false, nil
		}
		return true, op(ctx)
	})
}

// measure runs n clients, each calling step until it reports no more
// work, timing each call, and counts the store commands meanwhile.
func (c *client) measure(what string, n int, step func(context.Context) (bool, error)) (row, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu    sync.Mutex
		lat   []time.Duration
		first error
		wg    sync.WaitGroup
	)
	c.profile.start(what, n)
	defer c.profile.stop()
	before, cpu := commands(), cpuTime()
	start := time.Now()
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t := time.Now()
				more, err := step(ctx)
				if !more {
					return
				}
				d := time.Since(t)
				mu.Lock()
				if err != nil && first == nil {
					first = err
					cancel()
				}
				lat = append(lat, d)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed, cpu := time.Since(start), cpuTime()-cpu
	if first != nil {
		return row{}, fmt.Errorf("%s, %d clients: %w", what, n, first)
	}
	r := newRow(what, n, lat, elapsed, before.delta(commands()))
	r.cpu = cpu
	return r, nil
}

// cpuTime is the CPU time this process (the program and the clients:
// the whole path) has used so far. Per request it is the cost that the
// machine's other load does not change much, unlike requests per second.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idleLoad is what the program does by itself (its background loops),
// measured while no request is made.
type idleLoad struct {
	commands float64 // store commands per second
	cpu      float64 // CPU seconds per second (1 = one core busy)
}

func (c *client) idle(d time.Duration) idleLoad {
	before, cpu := commands(), cpuTime()
	time.Sleep(d)
	return idleLoad{commands: before.delta(commands()).total() / d.Seconds(), cpu: (cpuTime() - cpu).Seconds() / d.Seconds()}
}

// counts are store commands by name.
type counts map[string]float64

// monitoring are the driver's own commands (handshakes, heartbeats,
// session ends), not a request's.
var monitoring = map[string]bool{"hello": true, "isMaster": true, "ismaster": true, "ping": true,
	"query": true, "endSessions": true, "buildInfo": true}

// commands are the store commands the driver has sent in this process,
// by command name (store.CommandsSent: any store), its own monitoring left
// out.
func commands() counts {
	out := counts{}
	for k, n := range store.CommandsSent() {
		name, _, _ := strings.Cut(k, " ")
		if !monitoring[name] {
			out[name] += float64(n)
		}
	}
	return out
}

func (c counts) delta(after counts) counts {
	out := counts{}
	for k, v := range after {
		if d := v - c[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func (c counts) total() (n float64) {
	for _, v := range c {
		n += v
	}
	return n
}
