// Command dcm-clusters starts and stops local Kubernetes control planes for
// trying DCM against real clusters (`make clusters N=3`, `make
// clusters-down`), and builds the binaries the tests run (`make k8s-bins`,
// `make istio-bins`). See packages kubetest and kubetest/istiotest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/kubetest/istiotest"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "dcm-clusters:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("dcm-clusters", flag.ContinueOnError)
	dataDir := os.Getenv("DCM_DATA_DIR")
	if dataDir == "" {
		dataDir = ".dcm"
	}
	dir := fs.String("dir", filepath.Join(dataDir, "clusters"), "where kubeconfigs, certificates, logs and etcd data go")
	n := fs.Int("n", 3, "number of clusters")
	nodes := fs.Int("nodes", 1, "nodes per cluster: 1 (containerd, kubelet, kube-proxy, kube-router; needs root) or 0 (API objects only)")
	images := fs.String("images", "", "a directory of OCI image tarballs (make images: bin/images) to load into every node")
	const usage = "usage: dcm-clusters build | build-istio | up [-n N] [-nodes 0|1] [-images DIR] [-dir DIR] | down [-dir DIR]"
	if len(args) == 0 {
		return errors.New(usage)
	}
	verb := args[0]
	switch verb {
	case "-h", "-help", "--help", "help":
		fmt.Println(usage + `

  build        build the Kubernetes binaries (test/k8s: kube-apiserver, kube-controller-manager, kubectl,
               kube-scheduler, kubelet, kube-proxy; test/kube-router: kube-router) into bin/k8s
  build-istio  build istiod (test/istio) into bin/istio
  up           start N local clusters (etcd, kube-apiserver, kube-controller-manager; with -nodes 1
               a kube-scheduler and a node each) in DIR
  down         stop the clusters up started, and return once their processes are gone

flags:`)
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
		return nil
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	pidFile := filepath.Join(*dir, "pids")
	switch verb {
	case "build":
		root, err := kubetest.RepoRoot()
		if err != nil {
			return err
		}
		bin, err := kubetest.Build(context.Background(), root)
		if err != nil {
			return err
		}
		fmt.Println("the Kubernetes binaries are in", bin)
		return nil
	case "build-istio":
		root, err := kubetest.RepoRoot()
		if err != nil {
			return err
		}
		bin, err := istiotest.Build(context.Background(), root)
		if err != nil {
			return err
		}
		fmt.Println("istiod is", bin)
		return nil
	case "up":
		if _, err := os.Stat(pidFile); err == nil {
			return fmt.Errorf("clusters are already up (%s): run make clusters-down first", pidFile)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		root, err := kubetest.RepoRoot()
		if err != nil {
			return err
		}
		fmt.Println("building the Kubernetes binaries (test/k8s, test/kube-router) ...")
		bin, err := kubetest.Build(ctx, root)
		if err != nil {
			return err
		}
		abs, err := filepath.Abs(*dir)
		if err != nil {
			return err
		}
		opts := kubetest.Options{Dir: abs, N: *n, BinDir: bin, Detach: true, Nodes: *nodes}
		if *nodes > 0 && *images != "" {
			if opts.Images, err = filepath.Glob(filepath.Join(*images, "*.tar")); err != nil {
				return err
			}
		}
		h, err := kubetest.Start(ctx, opts)
		if err != nil {
			return err
		}
		var pids []string
		for _, p := range h.PIDs() {
			pids = append(pids, strconv.Itoa(p))
		}
		if err := os.WriteFile(pidFile, []byte(strings.Join(pids, "\n")+"\n"), 0o600); err != nil {
			h.Stop()
			return err
		}
		fmt.Printf("%d clusters are ready; admin kubeconfigs:\n", len(h.Clusters))
		for _, c := range h.Clusters {
			fmt.Printf("  %s  %s\n", c.KubeconfigPath, c.Server)
		}
		fmt.Println("stop them with: make clusters-down")
		return nil
	case "down":
		data, err := os.ReadFile(pidFile)
		if errors.Is(err, os.ErrNotExist) {
			fmt.Println("no clusters are up")
			return nil
		}
		if err != nil {
			return err
		}
		var pids []int
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				return fmt.Errorf("%s: bad pid %q", pidFile, f)
			}
			// A process that already exited is not an error.
			_ = syscall.Kill(pid, syscall.SIGTERM)
			pids = append(pids, pid)
		}
		// Wait for them to finish; kill what is still there after 30 s.
		deadline := time.Now().Add(30 * time.Second)
		for slices.ContainsFunc(pids, kubetest.Alive) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		for _, pid := range pids {
			if kubetest.Alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		for killed := time.Now(); slices.ContainsFunc(pids, kubetest.Alive); time.Sleep(50 * time.Millisecond) {
			if time.Since(killed) > 10*time.Second {
				return fmt.Errorf("processes of %s are still there 10 s after SIGKILL", pidFile)
			}
		}
		kubetest.Teardown(*dir)
		fmt.Printf("stopped %d processes\n", len(pids))
		return os.Remove(pidFile)
	default:
		return fmt.Errorf("unknown command %q: want build, build-istio, up or down", verb)
	}
}
