package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkNodeReady starts a cluster with one node (etcd, API server,
// controller manager, scheduler, containerd with pause and agnhost loaded,
// kubelet, kube-proxy, kube-router) until the node is Ready and its
// firewall is up, then a pod on it until Running; it reports both times
// and the memory (RSS) of every process of the cluster with the pod
// running. Run: go test -run '^$' -bench NodeReady -benchtime 3x ./platform/kubetest/
func BenchmarkNodeReady(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root, err := RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	bin, err := Build(ctx, root)
	if err != nil {
		b.Fatal(err)
	}
	var images []string
	for _, name := range []string{"pause", "agnhost"} {
		images = append(images, filepath.Join(root, "bin", "images", name+".tar"))
	}
	var ready, running time.Duration
	var rssBytes int64
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		h, err := Start(ctx, Options{Dir: b.TempDir(), N: 1, BinDir: bin, Nodes: 1, Images: images})
		if err != nil {
			b.Fatal(err)
		}
		ready += time.Since(start)
		c := h.Clusters[0]
		start = time.Now()
		if _, err := c.Kubectl(ctx, "run", "bench", "--image="+agnhost, "--image-pull-policy=Never", "--", "pause"); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Kubectl(ctx, "wait", "--for=jsonpath={.status.phase}=Running", "pod/bench", "--timeout=120s"); err != nil {
			b.Fatal(err)
		}
		running += time.Since(start)
		rssBytes += h.rss()
		h.Stop()
	}
	n := float64(b.N)
	b.ReportMetric(ready.Seconds()/n, "s-to-ready-node")
	b.ReportMetric(running.Seconds()/n, "s-to-running-pod")
	b.ReportMetric(float64(rssBytes)/n/(1<<20), "MiB-rss")
	b.ReportMetric(0, "ns/op")
}

// rss sums the resident memory of the harness's processes: etcd, each
// cluster's control plane and everything in its node's cgroup.
func (h *Harness) rss() int64 {
	pids := []int{h.etcd.pid()}
	for _, c := range h.Clusters {
		pids = append(pids, c.apiserver.pid(), c.kcm.pid(), c.scheduler.pid())
		if c.node != nil {
			for _, p := range cgroupPIDs(c.node.cgroup) {
				if pid, err := strconv.Atoi(p); err == nil {
					pids = append(pids, pid)
				}
			}
		}
	}
	var total int64
	for _, pid := range pids {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				total += kb << 10
			}
		}
	}
	return total
}
