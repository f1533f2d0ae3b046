package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// Agnhost is Kubernetes' e2e helper image as `make images` builds it.
const agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.53"

// TestNodeRunsPodsAndEnforcesNetworkPolicy: a pod runs on the node and
// serves; another namespace's pod reaches it directly and through its
// Service (kube-proxy) until a NetworkPolicy admits only its own
// namespace (kube-router), after which it does not, and its own
// namespace still does.
func TestNodeRunsPodsAndEnforcesNetworkPolicy(t *testing.T) {
	h := ForTestsWithNodes(t, 1)
	c := h.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	kubectl := func(args ...string) string { return c.MustKubectl(ctx, t, args...) }
	for _, ns := range []string{"np-a", "np-b"} {
		kubectl("create", "namespace", ns)
		kubectl("run", "client", "-n", ns, "--image="+agnhost, "--image-pull-policy=Never", "--", "pause")
	}
	kubectl("run", "server", "-n", "np-a", "--image="+agnhost, "--image-pull-policy=Never", "--port=8080", "--expose",
		"--", "netexec", "--http-port=8080")
	for _, ns := range []string{"np-a", "np-b"} {
		c.MustWait(ctx, t, ns, "--for=condition=Ready", "pod", "--all", "--timeout=120s")
	}
	require.Equal(t, c.Node(), kubectl("get", "pod", "server", "-n", "np-a", "-o", "jsonpath={.spec.nodeName}"))
	server := kubectl("get", "pod", "server", "-n", "np-a", "-o", "jsonpath={.status.podIP}") + ":8080"
	service := kubectl("get", "service", "server", "-n", "np-a", "-o", "jsonpath={.spec.clusterIP}") + ":8080"
	connect := func(from, to string) error {
		_, err := c.Kubectl(ctx, "exec", "-n", from, "client", "--", "/agnhost", "connect", to, "--timeout=3s")
		return err
	}
	require.NoError(t, connect("np-b", server), "no policy yet: another namespace connects")
	// kube-proxy programs a new Service's rules a moment after it exists.
	require.NoError(t, poll(ctx, time.Minute, func() error { return connect("np-b", service) }),
		"through the Service's cluster IP (kube-proxy)")

	kubectl("apply", "-f", writeFile(t, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: own-namespace, namespace: np-a}
spec:
  podSelector: {}
  policyTypes: [Ingress]
  ingress:
  - from: [{podSelector: {}}]
`))
	require.NoError(t, poll(ctx, time.Minute, func() error {
		if connect("np-b", server) == nil {
			return fmt.Errorf("np-b still connects to %s", server)
		}
		return nil
	}), "kube-router enforces the policy")
	require.Error(t, connect("np-b", service), "nor through the Service")
	require.NoError(t, connect("np-a", server), "its own namespace still connects")
}

// TestDeadHarnessIsCleanedUp: the nodes of a harness whose owner died (a
// killed test binary) are torn down by the next harness to start:
// processes, pods, mounts and its state; its slot is free again.
func TestDeadHarnessIsCleanedUp(t *testing.T) {
	if testing.Short() {
		t.Skip("needs real clusters; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, err := RepoRoot()
	require.NoError(t, err)
	bin, err := Build(ctx, root)
	require.NoError(t, err)
	images, err := TestImages(root)
	require.NoError(t, err)
	start := func() *Harness {
		h, err := Start(ctx, Options{Dir: t.TempDir(), N: 1, BinDir: bin, Nodes: 1, Images: images})
		require.NoError(t, err)
		return h
	}
	dead := start()
	defer dead.Stop()
	c := dead.Clusters[0]
	_, err = c.Kubectl(ctx, "run", "left", "--image="+agnhost, "--image-pull-policy=Never", "--", "pause")
	require.NoError(t, err)
	c.MustWait(ctx, t, "default", "--for=condition=Ready", "pod/left", "--timeout=120s")
	n := c.node
	pids := cgroupPIDs(n.cgroup)
	require.NotEmpty(t, pids, "the node's programs and the pod run in its cgroup")
	require.NotEmpty(t, mountsUnder(n.dir), "the pod's mounts")

	// Its owner is now a process that has exited.
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	st, err := readNodeState(dead.stateFile)
	require.NoError(t, err)
	st.Owner = gone.Process.Pid
	require.NoError(t, writeJSON(dead.stateFile, st))
	deadState, err := os.ReadFile(dead.stateFile)
	require.NoError(t, err)

	// The next harness to start tears it down, whichever slot it takes
	// (it may take the dead one's, and with it the slot's names: cgroup
	// root, network namespace, bridge, recreated for its node).
	next := start()
	defer next.Stop()
	var left []string
	for _, pid := range pids {
		if p, err := strconv.Atoi(pid); err == nil && Alive(p) {
			left = append(left, pid)
		}
	}
	require.Empty(t, describePIDs(left), "no process of the dead node is left")
	require.Empty(t, mountsUnder(n.dir), "nor a mount")
	require.NoFileExists(t, dead.stateFile)
	if next.net.Slot != dead.net.Slot {
		require.NoFileExists(t, "/run/netns/"+n.netns, "the dead node's network namespace")
		require.Error(t, run(ctx, "ip", "link", "show", dead.net.Bridge), "the dead harness's bridge")
		require.NoFileExists(t, slotFile(dead.net.Slot))
	}

	// A second sweeper that read the dead harness's state before the first
	// tore it down (two harnesses starting at once) would tear it down
	// again: when its slot is the next harness's now, the names are the
	// same (cgroup root, network namespace, veth, bridge) and that node
	// must not be touched (before the fix, its pods died with 137).
	if next.net.Slot == dead.net.Slot {
		require.NoError(t, os.WriteFile(dead.stateFile, deadState, 0o600))
		teardownState(dead.stateFile)
		require.NoFileExists(t, dead.stateFile, "the stale state is gone")
		require.NoError(t, next.Clusters[0].node.exited(), "the next harness's node programs run")
		require.NoError(t, run(ctx, "ip", "link", "show", next.net.Bridge), "the next harness's bridge is there")
		require.FileExists(t, "/run/netns/"+next.Clusters[0].node.netns)
		require.NoError(t, next.Clusters[0].node.ready(ctx))
	} else {
		t.Logf("the next harness took slot %d, not the dead one's %d: the stale teardown is not tried", next.net.Slot, dead.net.Slot)
	}

	next.Stop()
	require.NoDirExists(t, filepath.Join("/sys/fs/cgroup/memory", next.Clusters[0].node.cgroup))
	require.NoFileExists(t, "/run/netns/"+next.Clusters[0].node.netns)
	require.Error(t, run(ctx, "ip", "link", "show", next.net.Bridge), "the bridge is gone")
	require.NoFileExists(t, slotFile(next.net.Slot))
}

func cgroupPIDs(cg string) []string {
	var pids []string
	_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", cg), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "cgroup.procs" {
			data, _ := os.ReadFile(p)
			pids = append(pids, strings.Fields(string(data))...)
		}
		return nil
	})
	return pids
}

func mountsUnder(dir string) []string {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(unescapeMount(f[4]), dir+"/") {
			points = append(points, f[4])
		}
	}
	return points
}

func writeFile(t *testing.T, data string) string {
	p := filepath.Join(t.TempDir(), "manifest.yaml")
	require.NoError(t, os.WriteFile(p, []byte(data), 0o600))
	return p
}

// describePIDs gives each process's state and command line.
func describePIDs(pids []string) []string {
	var out []string
	for _, pid := range pids {
		stat, _ := os.ReadFile("/proc/" + pid + "/stat")
		cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		out = append(out, fmt.Sprintf("%s %s: %s", pid, strings.Fields(string(stat) + " ? ? ?")[2], strings.ReplaceAll(string(cmd), "\x00", " ")))
	}
	return out
}
