package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// sharedHarness is the clusters a test binary shares: one set without
// nodes, one with (ForTestsWithNodes).
type sharedHarness struct {
	once sync.Once
	h    *Harness
	dirs []string
	err  error
}

var shared [2]sharedHarness

// ForTests returns n clusters shared by the test binary's tests, started
// by the first call (building the binaries if they are not up to date);
// it skips the test under -short. Call StopShared from TestMain after
// m.Run. Tests share the clusters: they must use names of their own.
// The clusters have no nodes: pods are admitted but never run.
func ForTests(tb testing.TB, n int) *Harness {
	tb.Helper()
	return forTests(tb, n, 0)
}

// ForTestsWithNodes is ForTests with one node per cluster (a kubelet over
// containerd, kube-proxy, kube-router; see node.go) into which the images
// of `make images` that tests run (pause, agnhost and DCM's own) are
// loaded. Needs root, and `make images` first.
func ForTestsWithNodes(tb testing.TB, n int) *Harness {
	tb.Helper()
	return forTests(tb, n, 1)
}

func forTests(tb testing.TB, n, nodes int) *Harness {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs real clusters (kube-apiserver, etcd); skipped with -short")
	}
	s := &shared[nodes]
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		root, err := RepoRoot()
		if err != nil {
			s.err = err
			return
		}
		bin, err := Build(ctx, root)
		if err != nil {
			s.err = err
			return
		}
		opts := Options{N: n, BinDir: bin, Nodes: nodes}
		if nodes > 0 {
			if opts.Images, err = TestImages(root); err != nil {
				s.err = err
				return
			}
		}
		if opts.Dir, err = os.MkdirTemp("", "dcm-clusters-"); err != nil {
			s.err = err
			return
		}
		// etcd fsyncs every write: on tmpfs that costs nothing.
		if opts.EtcdDir, err = os.MkdirTemp("/dev/shm", "dcm-etcd-"); err != nil {
			opts.EtcdDir = ""
		}
		s.dirs = []string{opts.Dir, opts.EtcdDir}
		s.h, s.err = Start(ctx, opts)
	})
	if s.err != nil {
		tb.Fatalf("start test clusters: %v", s.err)
	}
	if len(s.h.Clusters) < n {
		tb.Fatalf("the shared test clusters are %d, not %d", len(s.h.Clusters), n)
	}
	return s.h
}

// TestImages are the image tarballs of `make images` (root/bin/images)
// that nodes load: every one there, or an error saying to run make images.
func TestImages(root string) ([]string, error) {
	dir := filepath.Join(root, "bin", "images")
	for _, name := range []string{"pause", "agnhost"} {
		p := filepath.Join(dir, name+".tar")
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("kubetest: the image %s is not built (make images): %w", p, err)
		}
	}
	return filepath.Glob(filepath.Join(dir, "*.tar"))
}

// IstioImages are the tarballs of Istio's images `make images` writes to
// root/bin/images/istio (istiod's pilot and the agent's proxyv2, named as
// the charts DCM renders name them; docs/images.md), which a test running
// a mesh loads with Cluster.LoadImages; an error saying to run make images
// when one is missing.
func IstioImages(root string) ([]string, error) {
	var out []string
	for _, name := range []string{"pilot", "proxyv2"} {
		p := filepath.Join(root, "bin", "images", "istio", name+".tar")
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("kubetest: the image %s is not built (make images): %w", p, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// StopShared stops the clusters ForTests and ForTestsWithNodes started,
// if any, and removes their files.
func StopShared() {
	for i := range shared {
		s := &shared[i]
		if s.h != nil {
			s.h.Stop()
		}
		for _, d := range s.dirs {
			if d != "" {
				_ = os.RemoveAll(d)
			}
		}
	}
}

// MustKubectl is Kubectl for tests: an error fails tb; the output comes
// without surrounding white space.
func (c *Cluster) MustKubectl(ctx context.Context, tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := c.Kubectl(ctx, args...)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// MustWait runs `kubectl wait` in namespace ns with args (e.g.
// "--for=condition=Ready", "pod", "--all", "--timeout=120s") and, when it
// fails, fails tb with what the cluster shows (Explain), so that a pod
// that never became Ready says why in the test's output.
func (c *Cluster) MustWait(ctx context.Context, tb testing.TB, ns string, args ...string) {
	tb.Helper()
	if _, err := c.Kubectl(ctx, append([]string{"wait", "-n", ns}, args...)...); err != nil {
		tb.Fatalf("%v\n%s", err, c.Explain(ctx, ns))
	}
}

// Explain is what a test that waited in vain for pods of namespace ns
// shows: the node's conditions, taints and allocated resources, the
// namespace's pods and events, and the last warnings and errors of the
// node's kubelet and containerd (eviction, sandbox and image failures).
func (c *Cluster) Explain(ctx context.Context, ns string) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"describe", "nodes"},
		{"get", "pods,events", "-n", ns, "-o", "wide"},
		{"describe", "pods", "-n", ns},
	} {
		out, err := c.Kubectl(ctx, args...)
		if err != nil {
			out += err.Error()
		}
		fmt.Fprintf(&b, "--- kubectl %s:\n%s\n", strings.Join(args, " "), out)
	}
	if c.node != nil {
		for _, name := range []string{"kubelet.log", "containerd.log"} {
			fmt.Fprintf(&b, "--- the last warnings and errors of %s:\n%s\n", name, lastProblems(c.node.file(name), 30))
		}
	}
	return b.String()
}

// lastProblems is the last n lines of a klog or logrus log that are
// warnings or errors.
func lastProblems(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "E") || strings.HasPrefix(l, "W") ||
			strings.Contains(l, "level=error") || strings.Contains(l, "level=warning") {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
