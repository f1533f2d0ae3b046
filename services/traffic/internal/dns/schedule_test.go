package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// held is a Connector whose calls for project a's clusters wait until
// released (or their pass's context ends), and whose calls for any other
// cluster fail at once; it counts who is inside.
type held struct {
	mu               sync.Mutex
	release          chan struct{}
	reached          map[string]int
	inside, maxTotal int
	insideOf, maxOf  map[string]int
}

func newHeld() *held {
	return &held{release: make(chan struct{}), reached: map[string]int{}, insideOf: map[string]int{}, maxOf: map[string]int{}}
}

func (h *held) connect(ctx context.Context, c Cluster) (*rest.Config, error) {
	project := c.Provider // the tests name each run's cluster provider after its project
	h.mu.Lock()
	h.reached[c.Cluster]++
	h.inside++
	h.insideOf[project]++
	h.maxTotal = max(h.maxTotal, h.inside)
	h.maxOf[project] = max(h.maxOf[project], h.insideOf[project])
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inside--
		h.insideOf[project]--
		h.mu.Unlock()
	}()
	if project == "a" {
		select {
		case <-h.release:
		case <-ctx.Done():
		}
	}
	return nil, errors.New("unreachable")
}

func allowProject(t *testing.T, c *Controller, project string, servers ...string) {
	t.Helper()
	_, err := c.allow.Put(context.Background(), "", project, &trafficv1.DnsAllowList{Servers: servers, Zones: []string{"example.com"}})
	require.NoError(t, err)
}

// TestPassesAreFairAndBounded: project a has six groups whose clusters do
// not answer (each pass waits), project b one group stored after them.
// b's group is passed while a's still wait — before, passes ran one group
// after another and b's waited behind all of a's — and no more groups
// than Parallel, nor of one project than PerProject, are passed at once.
func TestPassesAreFairAndBounded(t *testing.T) {
	h := newHeld()
	c := New(storetest.Open(t), h.connect, zapNop(), time.Minute)
	c.Parallel, c.PerProject = 3, 2
	ctx := context.Background()
	allowProject(t, c, "a", "127.0.0.1:53")
	allowProject(t, c, "b", "127.0.0.1:53")
	for i := range 6 {
		r := validRun()
		r.Clusters = []Cluster{{"a", fmt.Sprintf("a%d", i), "ns", "reader"}}
		require.NoError(t, c.Set(ctx, fmt.Sprintf("a/app/v1/g%d", i), []Run{r}))
	}
	r := validRun()
	r.Clusters = []Cluster{{"b", "b0", "ns", "reader"}}
	require.NoError(t, c.Set(ctx, "b/app/v1/g0", []Run{r}))

	done := make(chan error, 1)
	go func() { done <- c.SyncOnce(ctx) }()
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.reached["b0"] > 0 && h.insideOf["a"] == 2
	}, 20*time.Second, 10*time.Millisecond, "project b's group is passed while two of project a's wait")
	close(h.release)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the pass did not end")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range 6 {
		require.Equal(t, 1, h.reached[fmt.Sprintf("a%d", i)], "each group passed once")
	}
	require.LessOrEqual(t, h.maxTotal, 3, "at most Parallel groups at once")
	require.Equal(t, 2, h.maxOf["a"], "at most PerProject of a's groups at once, and that many")
}

// TestScheduleOrder: the groups go round robin over the projects.
func TestScheduleOrder(t *testing.T) {
	require.Equal(t, []string{"a/1", "b/1", "c/1", "a/2", "b/2", "a/3"},
		fairOrder([]string{"a/1", "a/2", "a/3", "b/1", "b/2", "c/1"}))
	var mu sync.Mutex
	var order []string
	require.NoError(t, schedule(context.Background(), []string{"a/1", "a/2", "b/1"}, 1, 1, func(_ context.Context, g string) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, g)
		return nil
	}))
	require.Equal(t, []string{"a/1", "a/2", "b/1"}, order, "one at a time: in order")
}

// TestFailingRunsBackOff: a run whose passes fail is passed again after
// 1, 2, 4 intervals (at most MaxBackoff), not at every pass; a good pass
// or a Set (the group applied again) ends it. The clock is the test's.
func TestFailingRunsBackOff(t *testing.T) {
	var calls atomic.Int32
	connect := func(context.Context, Cluster) (*rest.Config, error) {
		calls.Add(1)
		return nil, errors.New("dial tcp 10.1.2.3:6443: connect: connection refused")
	}
	c := New(storetest.Open(t), connect, zapNop(), time.Minute)
	c.MaxBackoff = 4 * time.Minute
	start := time.Now()
	var at time.Duration
	c.now = func() time.Time { return start.Add(at) }
	allow(t, c, "127.0.0.1:53")
	ctx := context.Background()
	require.NoError(t, c.Set(ctx, "p/lc/g", []Run{validRun()}))
	for _, step := range []struct {
		at    time.Duration
		calls int32
	}{
		{0, 1}, {0, 1}, {time.Minute, 2}, {2 * time.Minute, 2}, {3 * time.Minute, 3},
		{4 * time.Minute, 3}, {6 * time.Minute, 3}, {7 * time.Minute, 4}, {10 * time.Minute, 4}, {11 * time.Minute, 5},
	} {
		at = step.at
		require.NoError(t, c.SyncOnce(ctx))
		require.Equal(t, step.calls, calls.Load(), "passes that reached the cluster by %v", step.at)
	}
	s, err := c.Status(ctx, "p/lc/g")
	require.NoError(t, err)
	require.Equal(t, "cluster edge/c1 could not be reached", s[0].GetLastError(), "a short cause, not the dial error")
	require.Equal(t, int32(5), s[0].GetFailures())
	require.Equal(t, start.Add(11*time.Minute+4*time.Minute-30*time.Second).UTC(), s[0].GetNextTry().AsTime(), "the status says when the run is tried again")

	require.NoError(t, c.Set(ctx, "p/lc/g", []Run{validRun()}))
	require.NoError(t, c.SyncOnce(ctx))
	require.Equal(t, int32(6), calls.Load(), "a Set is passed at once")
}

// listener counts the TCP connections and UDP packets reaching a port of
// 127.0.0.1, closing each connection at once.
type listener struct {
	port int
	hits atomic.Int32
}

func listen(t *testing.T) *listener {
	t.Helper()
	l := &listener{}
	for range 20 {
		tl, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		port := tl.Addr().(*net.TCPAddr).Port
		ul, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			_ = tl.Close()
			continue
		}
		l.port = port
		t.Cleanup(func() { _ = tl.Close(); _ = ul.Close() })
		go func() {
			for {
				conn, err := tl.Accept()
				if err != nil {
					return
				}
				l.hits.Add(1)
				_ = conn.Close()
			}
		}()
		go func() {
			buf := make([]byte, 512)
			for {
				if _, _, err := ul.ReadFrom(buf); err != nil {
					return
				}
				l.hits.Add(1)
			}
		}()
		return l
	}
	t.Fatal("no port free for both TCP and UDP")
	return nil
}

// TestAddressRefusedBeforeDial: a run's DNS server on loopback is not
// dialed unless the project's allow-list admits it: not with no
// allow-list, not by a listed host name that resolves to loopback without
// the network listed. Each refusal says why in a short cause, and the
// port saw nothing. Admitted (network listed), the server is dialed, and a
// broken answer is a short cause too, never the dial error.
func TestAddressRefusedBeforeDial(t *testing.T) {
	l := listen(t)
	c := New(storetest.Open(t), unreachable, zapNop(), time.Minute)
	c.PassTimeout = 20 * time.Second
	noBackoff(c)
	ctx := context.Background()
	r := validRun()
	r.Params["rfc2136-port"] = strconv.Itoa(l.port)
	r.Clusters = nil // nothing to read: the DNS server is the only thing a pass would reach
	status := func() string {
		t.Helper()
		require.NoError(t, c.SyncOnce(ctx))
		s, err := c.Status(ctx, "p/lc/g")
		require.NoError(t, err)
		require.Len(t, s, 1)
		return s[0].GetLastError()
	}

	require.NoError(t, c.Set(ctx, "p/lc/g", []Run{r}))
	got := status()
	t.Logf("no allow-list: %s", got)
	require.Contains(t, got, `project "p" may use no DNS server`)
	require.Zero(t, l.hits.Load(), "nothing dialed")

	server := "localhost:" + strconv.Itoa(l.port)
	_, err := c.allow.Put(ctx, "", "p", &trafficv1.DnsAllowList{Servers: []string{server}, Zones: []string{"example.com"}})
	require.NoError(t, err)
	r.Params["rfc2136-host"] = "localhost"
	require.NoError(t, c.Set(ctx, "p/lc/g", []Run{r}))
	got = status()
	t.Logf("a listed name resolving to loopback: %s", got)
	require.Contains(t, got, "rfc2136-host localhost is (or resolves to) a loopback address outside the networks")
	require.Zero(t, l.hits.Load(), "nothing dialed")

	_, err = c.allow.Put(ctx, "", "p", &trafficv1.DnsAllowList{Servers: []string{server}, Zones: []string{"example.com"},
		Networks: []string{"127.0.0.0/8", "::1/128"}})
	require.NoError(t, err)
	got = status()
	t.Logf("admitted, the port closes the connection: %s", got)
	require.NotZero(t, l.hits.Load(), "dialed once admitted")
	require.Equal(t, "zone example.com cannot be read: its DNS server did not answer a complete transfer (refused, unreachable or timed out)", got)
	for _, raw := range []string{"127.0.0.1", strconv.Itoa(l.port), "EOF", "reset", "refused by"} {
		require.False(t, strings.Contains(got, raw), "the status shows no dial detail (%q)", raw)
	}
}
