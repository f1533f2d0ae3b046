// Package walkthrough_test runs the README's walkthrough: the shell blocks
// marked `<!-- walkthrough: terminal N -->`, read from README.md, as a
// newcomer types them, from an empty directory.
package walkthrough_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
)

// block is one fenced shell block of the README and the terminal it is
// typed in.
type block struct {
	terminal string
	line     int
	text     string
}

var marker = regexp.MustCompile(`^<!-- walkthrough: terminal (\d+) -->$`)

// walkthroughBlocks reads the marked blocks of a markdown document, in
// order. A marker must be followed by a ```sh fence.
func walkthroughBlocks(md string) ([]block, error) {
	var out []block
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		m := marker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(lines[i+1]) != "```sh" {
			return nil, fmt.Errorf("README.md:%d: a walkthrough marker must be followed by a ```sh block", i+1)
		}
		b := block{terminal: m[1], line: i + 3}
		for i += 2; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			b.text += lines[i] + "\n"
		}
		if i == len(lines) {
			return nil, fmt.Errorf("README.md:%d: unterminated block", b.line)
		}
		out = append(out, b)
	}
	return out, nil
}

func TestWalkthroughBlocks(t *testing.T) {
	got, err := walkthroughBlocks("x\n<!-- walkthrough: terminal 1 -->\n```sh\nmake run\n```\n" +
		"<!-- walkthrough: terminal 2 -->\n```sh\na\nb\n```\n")
	require.NoError(t, err)
	require.Equal(t, []block{{"1", 4, "make run\n"}, {"2", 8, "a\nb\n"}}, got)
	_, err = walkthroughBlocks("<!-- walkthrough: terminal 1 -->\n```\nmake run\n```\n")
	require.ErrorContains(t, err, "README.md:1")
	_, err = walkthroughBlocks("<!-- walkthrough: terminal 1 -->\n```sh\nmake run\n")
	require.ErrorContains(t, err, "unterminated")
}

// syncBuffer is an output both bash's pipes and the test read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeAddr is a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	addr, err := kubetest.FreeAddr()
	require.NoError(t, err)
	return addr
}

// TestREADMEWalkthrough types the README's walkthrough into two shells, in
// a directory of its own: terminal 1's blocks in the background (make
// clusters, make run), terminal 2's in order once make run logs
// "serving", each block as written. The only differences from a newcomer's
// shell are the environment: free ports (DCM_HTTP_ADDR, DCM_GRPC_ADDR,
// which the README says to set when the defaults are taken), GOWORK naming
// this checkout (so make builds it from any directory, with the warm build
// cache) and no dcmctl config file.
func TestREADMEWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("starts local clusters and make run: not in -short (make test-unit)")
	}
	root, err := kubetest.RepoRoot()
	require.NoError(t, err)
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	blocks, err := walkthroughBlocks(string(md))
	require.NoError(t, err)
	var first, second []block
	for _, b := range blocks {
		switch b.terminal {
		case "1":
			first = append(first, b)
		case "2":
			second = append(second, b)
		default:
			t.Fatalf("README.md:%d: terminal %s: the walkthrough has terminals 1 and 2", b.line, b.terminal)
		}
	}
	require.NotEmpty(t, first, "README.md has no terminal 1 block")
	require.NotEmpty(t, second, "README.md has no terminal 2 block")

	dir := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(root, "Makefile"), filepath.Join(dir, "Makefile")))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	// make clusters builds kube-apiserver, kube-controller-manager and
	// kubectl into the checkout's bin/k8s; the README puts ./bin/k8s on PATH.
	require.NoError(t, os.Symlink(filepath.Join(root, "bin", "k8s"), filepath.Join(dir, "bin", "k8s")))
	env := []string{
		"GOWORK=" + filepath.Join(root, "go.work"),
		"DCM_HTTP_ADDR=" + freeAddr(t),
		"DCM_GRPC_ADDR=" + freeAddr(t),
		"DCMCTL_CONFIG=" + filepath.Join(dir, "no-dcmctl-config.yaml"),
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DCM_") && !strings.HasPrefix(kv, "GOWORK=") && !strings.HasPrefix(kv, "DCMCTL_") {
			env = append(env, kv)
		}
	}
	// A shell in its own process group: what it started goes with it.
	shell := func(ctx context.Context, script string, out *syncBuffer) *exec.Cmd {
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		return cmd
	}

	// Terminal 1: make clusters, then make run, which stays.
	var script1 strings.Builder
	for _, b := range first {
		script1.WriteString(b.text)
	}
	term1 := &syncBuffer{}
	run := shell(context.Background(), script1.String(), term1)
	require.NoError(t, run.Start())
	var runErr error
	exited := make(chan struct{})
	go func() { runErr = run.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-run.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-run.Process.Pid, syscall.SIGKILL)
		}
		// Whatever the walkthrough got to, its clusters go.
		down := exec.Command("make", "clusters-down")
		down.Dir, down.Env = dir, env
		if out, err := down.CombinedOutput(); err != nil {
			t.Logf("make clusters-down: %v\n%s", err, out)
		}
	})
	serving := regexp.MustCompile(`"msg":"serving"`)
	deadline := time.After(15 * time.Minute)
	for !serving.MatchString(term1.String()) {
		select {
		case <-exited:
			t.Fatalf("terminal 1 ended (%v) before make run served:\n%s", runErr, term1.String())
		case <-deadline:
			t.Fatalf("make run did not log serving in 15 minutes:\n%s", term1.String())
		case <-time.After(time.Second):
		}
	}

	// Terminal 2: every block, in order, in one shell (variables carry over).
	var script2 strings.Builder
	for _, b := range second {
		fmt.Fprintf(&script2, "# README.md:%d\n%s", b.line, b.text)
	}
	term2 := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	err = shell(ctx, script2.String(), term2).Run()
	out := term2.String()
	if err != nil {
		t.Fatalf("terminal 2: %v\n%s\nterminal 1 (make run):\n%s\n%s", err, out, tail(term1.String(), 40), clusterOneShows(dir, env))
	}
	t.Logf("terminal 2:\n%s", out)

	// What the README's comments promise, in the order it promises it.
	expect := []string{
		`(?m)^NAME\s+DESCRIPTION\s*\nProject/proj1 created$`, // no projects yet, then the file's

		`(?m)^ClusterQuota/quota-1 created$`,
		`(?m)^Project/proj1 unchanged$`,
		`(?m)^ClusterQuota/quota-1 unchanged$`,
		`(?m)^lc-1\s+ns-1\s+standard\s+user-1\s+Created$`,
		`(?m)^proj1/lc-1: Instantiated (\d+)/\d+\n  local/cluster-1 \d+/\d+ applied\n  local/cluster-2 \d+/\d+ applied$`,
		`(?m)^kubeconfig written to \.dcm/lc-1-cluster-1\.kubeconfig$`,
		`(?m)^configmap/hello created$`,
		`(?m)^hello\s+1\s`,
		`(?m)^configmaps\s+\[\]\s+\[\]\s+\[get list create\]$`,
		`(?m)^pod/hello created$`,
		`(?m)^pod/hello condition met$`, // Ready on cluster-1's node
		`"state":"Instantiated"`,
		`(?m)^proj1/lc-1: Terminated \d+/\d+\n  local/cluster-1 \d+/\d+ deleted\n  local/cluster-2 \d+/\d+ deleted$`,
		`(?m)^ClusterQuota/quota-1 deleted$`,
		`(?m)^Project/proj1 deleted$`,
		`(?m)^stopped \d+ processes$`,
	}
	rest := out
	for _, e := range expect {
		loc := regexp.MustCompile(e).FindStringIndex(rest)
		require.NotNil(t, loc, "terminal 2 has no %q after what came before:\n%s", e, out)
		rest = rest[loc[1]:]
	}
	for _, verb := range []string{"created", "unchanged", "deleted"} {
		n := len(regexp.MustCompile(`(?m)^[A-Z][A-Za-z]+/[a-z0-9-]+ `+verb+`$`).FindAllString(out, -1))
		require.Equal(t, 8, n, "the file's 8 objects %s:\n%s", verb, out)
	}
	// The tenant's rules in ns-1: the permissions', and no more.
	require.Regexp(t, `(?m)^pods\s+\[\]\s+\[\]\s+\[get list watch create\]$`, out)
	require.NotRegexp(t, `(?m)^(secrets|\*)\s`, out)
	fi, err := os.Stat(filepath.Join(dir, ".dcm", "lc-1-cluster-1.kubeconfig"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the kubeconfig holds a private key")
	_, err = os.Stat(filepath.Join(dir, ".dcm", "clusters", "pids"))
	require.ErrorIs(t, err, os.ErrNotExist, "make clusters-down stopped the clusters")
	require.Empty(t, processesUnder(filepath.Join(dir, ".dcm", "clusters")), "make clusters-down left no node program (containerd, kubelet, pods)")
}

// processesUnder lists the processes whose command line names a path
// under dir (the nodes' containerd and kubelet name their files there).
func processesUnder(dir string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), dir+"/") {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// clusterOneShows is what cluster-1 of make clusters shows when a block
// failed: its node (conditions, taints, allocated resources), ns-1's pods
// and the cluster's events, and the last lines of its kubelet's log.
func clusterOneShows(dir string, env []string) string {
	var b strings.Builder
	kc := filepath.Join(dir, ".dcm", "clusters", "cluster-1.kubeconfig")
	for _, args := range [][]string{{"describe", "nodes"}, {"get", "pods", "-n", "ns-1", "-o", "wide"}, {"get", "events", "-A"}} {
		cmd := exec.Command(filepath.Join(dir, "bin", "k8s", "kubectl"), append([]string{"--kubeconfig=" + kc}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		fmt.Fprintf(&b, "--- cluster-1: kubectl %s (%v):\n%s\n", strings.Join(args, " "), err, out)
	}
	log, err := os.ReadFile(filepath.Join(dir, ".dcm", "clusters", "cluster-1", "node", "kubelet.log"))
	fmt.Fprintf(&b, "--- cluster-1's kubelet log (%v):\n%s\n", err, tail(string(log), 30))
	return b.String()
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
