package kubetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dcm-project/dcm/platform/pki"
)

// A node is one Kubernetes node of a cluster: containerd (with runc and
// the CNI plugins of Debian's packages), a kubelet, kube-proxy and
// kube-router's NetworkPolicy firewall, all in a network namespace of their
// own, so that each node has its own address, iptables and pod routes while
// every node shares the machine's mount namespace (the kubelet's volumes
// must be what containerd mounts) and cgroup tree (under a cgroup root of
// its own).
//
// The network of a harness (slot k, 0 to maxSlots-1, claimed by creating
// the bridge dcmk<k>):
//
//	bridge dcmk<k>      10.(200+k).0.1/24 on the host; each cluster's API
//	                    server listens there (the nodes cannot reach 127.0.0.1)
//	node of cluster i   10.(200+k).0.(10+i), its namespace's eth0 on the bridge
//	pods of cluster i   10.(200+k).i.0/24 (CNI ptp + host-local, routed by the node)
//	services of i       10.(200+k).(100+i).0/24 (kube-proxy, iptables mode)
//
// Nothing routes these addresses off the machine: the bridge has no
// uplink, and pods reach the rest of the machine only through the host's
// own address on it.
type node struct {
	c       *Cluster
	name    string // the Node's name: <cluster>-node
	dir     string // everything the node writes: <cluster dir>/node
	netns   string
	link    string // the host's end of the node's veth: dcmk<k>n<i>
	ip      string
	podCIDR string
	cgroup  string // the kubelet's cgroup root, e.g. /dcmk0-cluster-1

	containerd, kubelet, proxy, router *process
}

// maxSlots bounds the harnesses with nodes on one machine at once.
const maxSlots = 16

// network is the harness's share of the machine's network.
type network struct {
	Slot   int    `json:"slot"`
	Bridge string `json:"bridge"`
	HostIP string `json:"hostIP"`
}

func (n network) prefix() string { return "10." + strconv.Itoa(200+n.Slot) }

// nodeState is what teardown needs, kept in <dir>/nodes.json so that `make
// clusters-down` and a later harness (after a killed test) can clean up.
type nodeState struct {
	Owner int `json:"owner"`
	// OwnerStart is the owner's start time (/proc/<pid>/stat, field 22):
	// a pid the kernel has given to another process since is not the
	// owner, so its harness is dead.
	OwnerStart uint64   `json:"ownerStart,omitempty"`
	Net        network  `json:"net"`
	Netns      []string `json:"netns"`
	Links      []string `json:"links"`
	Cgroups    []string `json:"cgroups"`
	Dirs       []string `json:"dirs"`
}

// slotFile records which harness holds slot k (its nodes.json).
func slotFile(k int) string { return fmt.Sprintf("/run/dcm-kubetest/slot-%d", k) }

// machineLock serializes, across every process of the machine, the sweep
// of dead harnesses with the claim of a slot and every teardown. Without
// it two harnesses starting at once (test binaries of several packages,
// make clusters) both tore down the same dead harness, and the later of
// the two, working from the names of its slot (cgroup root, network
// namespace, veth, bridge), killed the node of the harness that had
// claimed the slot in between: its pods died with exit code 137 and its
// new pods never became Ready.
func machineLock() (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(slotFile(0)), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(filepath.Dir(slotFile(0)), "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("kubetest: lock %s: %w", f.Name(), err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

// ownerAlive says whether the harness of st still has its owner.
func ownerAlive(st nodeState) bool {
	if !Alive(st.Owner) {
		return false
	}
	start, ok := processStart(st.Owner)
	return st.OwnerStart == 0 || !ok || start == st.OwnerStart
}

// processStart is pid's start time in clock ticks since boot.
func processStart(pid int) (uint64, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	f := strings.Fields(rest) // from field 3, the state
	if len(f) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}

// claimNetwork first tears down what every harness whose owner died left
// on the machine (any slot: a killed test binary's nodes), then takes the
// first free slot, one whose bridge does not exist.
func claimNetwork(ctx context.Context, stateFile string) (network, error) {
	if os.Geteuid() != 0 {
		return network{}, errors.New("kubetest: nodes need root (network namespaces, cgroups, mounts)")
	}
	for _, bin := range []string{"containerd", "runc", "iptables", "ipset", "nsenter", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			return network{}, fmt.Errorf("kubetest: nodes need %s (.ci/run installs containerd, runc, containernetworking-plugins, iptables, ipset, conntrack): %w", bin, err)
		}
	}
	if _, err := os.Stat(filepath.Join(cniBinDir, "ptp")); err != nil {
		return network{}, fmt.Errorf("kubetest: nodes need the CNI plugins in %s (apt-get install containernetworking-plugins): %w", cniBinDir, err)
	}
	unlock, err := machineLock()
	if err != nil {
		return network{}, err
	}
	defer unlock()
	for k := range maxSlots {
		data, err := os.ReadFile(slotFile(k))
		if err != nil {
			continue
		}
		state := strings.TrimSpace(string(data))
		if st, err := readNodeState(state); err == nil && !ownerAlive(st) {
			teardownLocked(state)
		}
	}
	for k := range maxSlots {
		n := network{Slot: k, Bridge: "dcmk" + strconv.Itoa(k)}
		n.HostIP = n.prefix() + ".0.1"
		if err := run(ctx, "ip", "link", "add", n.Bridge, "type", "bridge"); err != nil {
			continue // taken (or being taken) by another harness
		}
		if err := os.WriteFile(slotFile(k), []byte(stateFile), 0o600); err != nil {
			return network{}, err
		}
		for _, args := range [][]string{
			{"addr", "add", n.HostIP + "/24", "dev", n.Bridge},
			{"link", "set", n.Bridge, "up"},
		} {
			if err := run(ctx, "ip", args...); err != nil {
				return network{}, err
			}
		}
		return n, nil
	}
	return network{}, fmt.Errorf("kubetest: all %d node network slots are taken (bridges dcmk0..dcmk%d)", maxSlots, maxSlots-1)
}

func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func readNodeState(path string) (nodeState, error) {
	var st nodeState
	data, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(data, &st)
}

// Alive says whether pid runs (a zombie does not).
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

const cniBinDir = "/usr/lib/cni"

// newNode lays out cluster c's node (the i-th cluster, from 1).
func (h *Harness) newNode(c *Cluster, i int) *node {
	p := h.net.prefix()
	return &node{
		c: c, name: c.Name + "-node", dir: c.file("node"),
		netns:   fmt.Sprintf("dcmk%d-%s", h.net.Slot, c.Name),
		link:    fmt.Sprintf("dcmk%dn%d", h.net.Slot, i),
		ip:      fmt.Sprintf("%s.0.%d", p, 10+i),
		podCIDR: fmt.Sprintf("%s.%d.0/24", p, i),
		cgroup:  fmt.Sprintf("/dcmk%d-%s", h.net.Slot, c.Name),
	}
}

// serviceCIDR is cluster i's Service range when it has a node.
func (n network) serviceCIDR(i int) string { return fmt.Sprintf("%s.%d.0/24", n.prefix(), 100+i) }

// cgroupControllers are the cgroup v1 hierarchies the kubelet uses.
var cgroupControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd"}

// plumb makes the node's network namespace, its link to the bridge, its
// cgroup root and its files.
func (n *node) plumb(ctx context.Context, net network) error {
	if err := run(ctx, "ip", "netns", "add", n.netns); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "add", n.link, "type", "veth", "peer", "name", "eth0", "netns", n.netns},
		{"link", "set", n.link, "master", net.Bridge, "up"},
		{"-n", n.netns, "addr", "add", n.ip + "/24", "dev", "eth0"},
		{"-n", n.netns, "link", "set", "eth0", "up"},
		{"-n", n.netns, "link", "set", "lo", "up"},
		{"-n", n.netns, "route", "add", "default", "via", net.HostIP},
		// The host reaches the node's pods (the API server's proxy, tests).
		{"route", "add", n.podCIDR, "via", n.ip},
	} {
		if err := run(ctx, "ip", args...); err != nil {
			return err
		}
	}
	if err := run(ctx, "ip", "netns", "exec", n.netns, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"); err != nil {
		return err
	}
	for _, ctl := range cgroupControllers {
		dir := filepath.Join("/sys/fs/cgroup", ctl, n.cgroup)
		if err := os.MkdirAll(filepath.Join(dir, "runtime"), 0o755); err != nil {
			return err
		}
		if ctl == "cpuset" {
			// A new cpuset has no CPUs or memory nodes until given its parent's.
			for _, d := range []string{dir, filepath.Join(dir, "runtime")} {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
						return err
					}
				}
			}
		}
	}
	return os.MkdirAll(n.dir, 0o700)
}

// start runs containerd (loading images), then the kubelet, kube-proxy and
// kube-router, and waits until the Node is Ready.
func (n *node) start(ctx context.Context, images []string) error {
	h := n.c.h
	files, err := n.writeFiles()
	if err != nil {
		return err
	}
	sock := files["containerd.sock"]
	if n.containerd, err = h.spawn(n.file("containerd.log"), "nsenter", "--net=/run/netns/"+n.netns,
		"containerd", "--config", files["containerd.toml"]); err != nil {
		return err
	}
	// containerd and the shims it starts (which outlive it) are counted in
	// the node's cgroup, so that teardown finds every one of them.
	if err := n.adopt(n.containerd); err != nil {
		return err
	}
	if err := poll(ctx, 30*time.Second, func() error {
		if n.containerd.exited() {
			return fmt.Errorf("%s: containerd %w: see %s", n.name, errExited, n.file("containerd.log"))
		}
		return run(ctx, "ctr", "--address", sock, "version")
	}); err != nil {
		return err
	}
	if err := n.load(ctx, images); err != nil {
		return err
	}
	netns := "--net=/run/netns/" + n.netns
	if n.kubelet, err = h.spawn(n.file("kubelet.log"), "nsenter", netns, filepath.Join(h.opts.BinDir, "kubelet"),
		"--config="+files["kubelet.yaml"], "--kubeconfig="+files["kubelet.kubeconfig"],
		"--hostname-override="+n.name, "--node-ip="+n.ip, "--root-dir="+n.file("kubelet"),
		"--cert-dir="+n.file("kubelet/pki"), "--v=1"); err != nil {
		return err
	}
	if n.proxy, err = h.spawn(n.file("kube-proxy.log"), "nsenter", netns, filepath.Join(h.opts.BinDir, "kube-proxy"),
		"--config="+files["kube-proxy.yaml"], "--v=1"); err != nil {
		return err
	}
	for _, p := range []*process{n.kubelet, n.proxy} {
		if err := n.adopt(p); err != nil {
			return err
		}
	}
	if err := poll(ctx, 120*time.Second, func() error {
		if err := n.exited(); err != nil {
			return err
		}
		return n.ready(ctx)
	}); err != nil {
		return err
	}
	// kube-router finds its node by name: it starts once the Node exists,
	// and is ready once its chains are in the node's iptables.
	if n.router, err = h.spawn(n.file("kube-router.log"), "nsenter", netns, filepath.Join(h.opts.BinDir, "kube-router"),
		"--kubeconfig="+files["kube-router.kubeconfig"], "--hostname-override="+n.name,
		"--run-firewall=true", "--run-router=false", "--run-service-proxy=false", "--enable-cni=false",
		"--metrics-port=0", "--health-port=0", "--v=1"); err != nil {
		return err
	}
	if err := n.adopt(n.router); err != nil {
		return err
	}
	return poll(ctx, 60*time.Second, func() error {
		if err := n.exited(); err != nil {
			return err
		}
		return run(ctx, "ip", "netns", "exec", n.netns, "iptables", "-w", "-S", "KUBE-ROUTER-FORWARD")
	})
}

// exited says which of the node's programs has exited, if one has.
func (n *node) exited() error {
	for _, p := range []struct {
		name string
		p    *process
	}{{"containerd", n.containerd}, {"kubelet", n.kubelet}, {"kube-proxy", n.proxy}, {"kube-router", n.router}} {
		if p.p != nil && p.p.exited() {
			return fmt.Errorf("%s: %s %w: see %s", n.name, p.name, errExited, n.file(p.name+".log"))
		}
	}
	return nil
}

// adopt moves a process of the node into the node's cgroup (its runtime
// child), where teardown finds it.
func (n *node) adopt(p *process) error {
	for _, ctl := range cgroupControllers {
		if err := os.WriteFile(filepath.Join("/sys/fs/cgroup", ctl, n.cgroup, "runtime", "cgroup.procs"),
			[]byte(strconv.Itoa(p.pid())), 0o644); err != nil {
			return fmt.Errorf("%s: cgroup %s: %w", n.name, ctl, err)
		}
	}
	return nil
}

func (n *node) file(name string) string { return filepath.Join(n.dir, name) }

// ready asks the API server whether the Node is Ready.
func (n *node) ready(ctx context.Context) error {
	body, err := n.c.get(ctx, "/api/v1/nodes/"+n.name)
	if err != nil {
		return err
	}
	var obj struct {
		Status struct {
			Conditions []struct{ Type, Status, Message string }
		}
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return err
	}
	for _, c := range obj.Status.Conditions {
		if c.Type == "Ready" {
			if c.Status == "True" {
				return nil
			}
			return fmt.Errorf("node %s is not Ready: %s", n.name, c.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition yet", n.name)
}

// writeFiles writes the node's configuration and credentials and returns
// their paths by name.
func (n *node) writeFiles() (map[string]string, error) {
	c := n.c
	paths := map[string]string{"containerd.sock": n.file("containerd.sock")}
	creds := map[string]pki.Identity{
		"kubelet":     {Subject: "system:node:" + n.name, Role: "system:nodes"},
		"kube-proxy":  {Subject: "system:kube-proxy"},
		"kube-router": {Subject: "kube-router", Role: "system:masters"},
	}
	files := map[string]string{}
	for name, id := range creds {
		cert, key, err := c.CA.Issue(pki.Request{Identity: id, Client: true, NotAfter: time.Now().Add(365 * 24 * time.Hour)})
		if err != nil {
			return nil, err
		}
		files[name+".kubeconfig"] = string(kubeconfig(c.Name, c.Server, pki.CertPEM(c.CA.Cert.Raw), cert, key))
	}
	files["containerd.toml"] = fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  netns_mounts_under_state_dir = true
  # The machine's root lacks CAP_SYS_RESOURCE: a negative oom_score_adj
  # (the kubelet's -998 for sandboxes) is clamped to containerd's own.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
`, n.file("containerd/root"), n.file("containerd/state"), paths["containerd.sock"], paths["containerd.sock"]+".ttrpc",
		n.file("containerd/opt"), cniBinDir, n.file("cni"))
	cni, err := json.Marshal(map[string]any{
		"cniVersion": "1.0.0", "name": "dcm",
		"plugins": []any{
			map[string]any{"type": "ptp", "ipMasq": true, "ipam": map[string]any{
				"type": "host-local", "ranges": [][]map[string]string{{{"subnet": n.podCIDR}}},
				"routes": []map[string]string{{"dst": "0.0.0.0/0"}}, "dataDir": n.file("cni-ipam"),
			}},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	})
	if err != nil {
		return nil, err
	}
	files["cni/10-dcm.conflist"] = string(cni)
	files["kubelet.yaml"] = fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://%[3]s
cgroupDriver: cgroupfs
cgroupRoot: %[4]s
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failSwapOn: false
podCIDR: %[5]s
podLogsDir: %[6]q
clusterDomain: cluster.local
# kube-dns's Service address (dns.go: StartDNS runs it).
clusterDNS: [%[7]s]
resolvConf: /etc/resolv.conf
serializeImagePulls: false
# How often the kubelet syncs each pod, and so how soon a changed Secret
# or ConfigMap reaches the pods' volumes (default 1m): a rotated cacerts
# reaches istiod's volume within it.
syncFrequency: 15s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "50Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
maxPods: 60
protectKernelDefaults: false
registerNode: true
`, n.ip, c.file("ca.crt"), paths["containerd.sock"], n.cgroup, n.podCIDR, n.file("pod-logs"), c.DNSIP())
	files["kube-proxy.yaml"] = fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: %[1]q}
hostnameOverride: %[2]s
bindAddress: %[3]s
clusterCIDR: %[4]s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0}
`, n.file("kube-proxy.kubeconfig"), n.name, n.ip, n.podCIDR)
	for name, data := range files {
		p := n.file(name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			return nil, err
		}
		paths[name] = p
	}
	return paths, nil
}

// teardownState removes what the nodes of the harness whose nodes.json is
// at path left on the machine: every process in their cgroups (pods,
// containerd, its shims), their mounts, cgroups and network namespaces,
// and the harness's bridge; under the machine lock.
func teardownState(path string) {
	unlock, err := machineLock()
	if err != nil {
		return
	}
	defer unlock()
	teardownLocked(path)
}

// teardownLocked is teardownState for a caller holding the machine lock.
// The names of a node's cgroup, network namespace and links are its
// slot's: when the slot is another harness's now (this one's teardown was
// cut short after its bridge went), only its own mounts and state go.
func teardownLocked(path string) {
	st, err := readNodeState(path)
	if err != nil {
		return
	}
	if data, err := os.ReadFile(slotFile(st.Net.Slot)); err == nil && !samePath(strings.TrimSpace(string(data)), path) {
		for _, d := range st.Dirs {
			unmountUnder(d)
		}
		_ = os.Remove(path)
		return
	}
	for _, cg := range st.Cgroups {
		killCgroup(cg)
	}
	for _, d := range st.Dirs {
		unmountUnder(d)
	}
	for _, cg := range st.Cgroups {
		removeCgroup(cg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, l := range st.Links {
		_ = run(ctx, "ip", "link", "del", l) // and its peer, the node's eth0
	}
	for _, ns := range st.Netns {
		_ = run(ctx, "ip", "netns", "del", ns)
	}
	if st.Net.Bridge != "" {
		_ = run(ctx, "ip", "link", "del", st.Net.Bridge)
		_ = os.Remove(slotFile(st.Net.Slot))
	}
	_ = os.Remove(path)
}

// samePath says whether a and b name the same file: make clusters and
// make clusters-down may name the state by a relative and an absolute path.
func samePath(a, b string) bool {
	if a == b {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// killCgroup kills every process under cgroup root cg (pids hierarchy)
// until none is left, for at most 30 s.
func killCgroup(cg string) {
	root := filepath.Join("/sys/fs/cgroup/pids", cg)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var pids []int
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	}
}

// removeCgroup removes cgroup cg and its children in every hierarchy
// (runc also makes them in the cgroup v2 one, "unified").
func removeCgroup(cg string) {
	for _, ctl := range append(cgroupControllers, "unified") {
		root := filepath.Join("/sys/fs/cgroup", ctl, cg)
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			_ = os.Remove(dirs[i])
		}
	}
}

// unmountUnder detaches every mount at or below dir, deepest first.
func unmountUnder(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := unescapeMount(f[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	for i := len(points) - 1; i >= 0; i-- {
		_ = syscall.Unmount(points[i], syscall.MNT_DETACH)
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// run runs a command and returns its output in the error when it fails.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Kubectl runs bin/k8s/kubectl with the cluster's admin kubeconfig and
// returns its standard output; an error carries its standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	return c.KubectlAs(ctx, c.KubeconfigPath, args...)
}

// KubectlAs is Kubectl with another kubeconfig (a tenant's).
func (c *Cluster) KubectlAs(ctx context.Context, kubeconfig string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.h.opts.BinDir, "kubectl"), append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// load imports image tarballs into the node's containerd (namespace k8s.io,
// the kubelet's).
func (n *node) load(ctx context.Context, images []string) error {
	for _, img := range images {
		if err := run(ctx, "ctr", "--address", n.file("containerd.sock"), "-n", "k8s.io", "images", "import", "--no-unpack=false", img); err != nil {
			return fmt.Errorf("%s: load %s: %w", n.name, img, err)
		}
	}
	return nil
}

// LoadImages imports image tarballs into the cluster's node, beside those
// it started with: the images only some tests run (Istio's, IstioImages).
// Importing an image the node has is harmless. An error without a node.
func (c *Cluster) LoadImages(ctx context.Context, images ...string) error {
	if c.node == nil {
		return fmt.Errorf("kubetest: cluster %s has no node to load images into", c.Name)
	}
	return c.node.load(ctx, images)
}

// Node is the cluster's node's name, or "" without one.
func (c *Cluster) Node() string {
	if c.node == nil {
		return ""
	}
	return c.node.name
}
