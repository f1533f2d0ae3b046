// Command rsync-bench measures the resource synchronizer's engine (`make
// bench-rsync`): a logical-cloud-sized set of 8 objects applied to many
// simulated clusters (in-process stand-ins with injected latency and
// failures, behind the engine's Cluster interface), then to real clusters
// started by kubetest. It reports the time to converge, objects per second,
// store writes per cluster and the process's peak RSS. The store is the
// embedded one, as in a default installation.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/secrets"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rsync-bench:", err)
		os.Exit(1)
	}
}

func run() error {
	clusters := flag.Int("clusters", 1000, "simulated clusters")
	latency := flag.Duration("latency", 50*time.Millisecond, "simulated round trip per API call")
	failures := flag.Float64("failure-rate", 0.01, "share of simulated API calls that fail (retryably)")
	concurrency := flag.String("concurrency", "512", "engine concurrency settings to run, comma-separated (512 is the default)")
	replicas := flag.Int("replicas", 1, "rsync replicas sharing the store: this process and replicas-1 child processes")
	kill := flag.Bool("kill", false, "with -replicas > 1: kill one child replica (SIGKILL) once half the objects are applied")
	child := flag.String("child", "", "internal: run as the replica of this name on DCM_BENCH_URI")
	real := flag.Int("real", 3, "real clusters to run on afterwards (0: none)")
	runs := flag.Int("runs", 5, "runs on the real clusters (the median is reported)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile to this file")
	flag.StringVar(&memprofile, "memprofile", "", "write a heap profile to this file once the first rollout converged")
	probeClusters := flag.Int("probe-clusters", 0, "probe this many simulated clusters (cluster health) beside the rollout to -clusters of them, and compare the rollout's convergence with and without the probes (health.go); 0: the usual benchmark")
	probeInterval := flag.Duration("probe-interval", 30*time.Second, "with -probe-clusters: the probe interval (DCM_CLUSTER_PROBE_INTERVAL)")
	flag.Parse()
	if *probeClusters > 0 {
		return benchHealth(*clusters, *probeClusters, *probeInterval, *runs, *latency, *failures)
	}
	if *child != "" {
		return runChild(*child, *clusters, *latency, *failures)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	csr, err := csrManifest()
	if err != nil {
		return err
	}
	set := lcSet("bench", csr)
	fmt.Printf("workload: %d objects per cluster (Namespace, ServiceAccount, Role, RoleBinding, ResourceQuota, LimitRange, ConfigMap, CertificateSigningRequest)\n", len(set))
	for _, c := range strings.Split(*concurrency, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil {
			return fmt.Errorf("-concurrency: %w", err)
		}
		sims := engine.SimulatedClusters{}
		for i := range *clusters {
			sims[fmt.Sprintf("sim/c%04d", i)] = &engine.Simulated{Latency: *latency, FailureRate: *failures}
		}
		fmt.Printf("\nsimulated: %d clusters, %s latency per call, %.1f%% of calls fail, concurrency %d\n", *clusters, *latency, 100**failures, n)
		topo := topology{replicas: *replicas, kill: *kill, args: []string{"-clusters", strconv.Itoa(*clusters),
			"-latency", latency.String(), "-failure-rate", strconv.FormatFloat(*failures, 'f', -1, 64)}}
		if *replicas > 1 {
			fmt.Printf("  replicas: %d (one killed at 50 %%: %v)\n", *replicas, *kill)
		}
		if err := bench(sims, keys(sims), set, engine.Config{Concurrency: n}, 1, topo); err != nil {
			return err
		}
		calls := int64(0)
		for _, s := range sims {
			calls += s.Calls.Load()
		}
		fmt.Printf("  simulated API calls: %d (%.1f per cluster)\n", calls, float64(calls)/float64(*clusters))
	}
	if *real == 0 {
		return nil
	}
	return benchReal(*real, *runs, set)
}

func keys(m engine.SimulatedClusters) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// bench applies set to every cluster runs times (deleting in between) and
// prints the figures.
func bench(conn engine.Connector, clusterKeys []string, set []string, cfg engine.Config, runs int, topo topology) error {
	st, keyLine, closeStore, err := openStore()
	if err != nil {
		return err
	}
	defer closeStore()
	cfg.Replica = "bench-0"
	e := engine.New(st, conn, cfg, zap.NewNop())
	children, err := topo.start(st.ClientURI(), keyLine)
	if err != nil {
		return err
	}
	defer children.stop()
	defer runEngine(e)()
	ctx := context.Background()

	var targets []*rsyncv1.ClusterResources
	for _, k := range clusterKeys {
		provider, name, _ := strings.Cut(k, "/")
		cr := &rsyncv1.ClusterResources{Provider: provider, Cluster: name}
		for _, m := range set {
			cr.Resources = append(cr.Resources, &rsyncv1.Resource{Manifest: m})
		}
		targets = append(targets, cr)
	}
	objects := len(clusterKeys) * len(set)
	var applyTimes, savedTimes, deleteTimes []time.Duration
	var writesPerRun []float64
	for run := range runs {
		owner := "bench/lc-" + strconv.Itoa(run)
		w0 := e.StoreWrites()
		start := time.Now()
		if err := children.waitSplit(ctx, st); err != nil {
			return err
		}
		if _, err := e.Submit(ctx, owner, targets); err != nil {
			return err
		}
		if topo.kill {
			if err := children.killAtHalf(ctx, e, owner, start); err != nil {
				return err
			}
		}
		if err := waitSettled(ctx, e, owner, rsyncv1.State_STATE_APPLIED); err != nil {
			return err
		}
		applyTimes = append(applyTimes, time.Since(start))
		if run == 0 && memprofile != "" {
			if err := writeHeap(memprofile); err != nil {
				return err
			}
		}
		for e.Unsaved() > 0 {
			time.Sleep(10 * time.Millisecond)
		}
		savedTimes = append(savedTimes, time.Since(start))
		writesPerRun = append(writesPerRun, float64(e.StoreWrites()-w0)/float64(len(clusterKeys)))
		start = time.Now()
		if _, err := e.Delete(ctx, owner); err != nil {
			return err
		}
		if err := waitSettled(ctx, e, owner, rsyncv1.State_STATE_DELETED); err != nil {
			return err
		}
		for e.Unsaved() > 0 {
			time.Sleep(10 * time.Millisecond)
		}
		deleteTimes = append(deleteTimes, time.Since(start))
	}
	apply, del := median(applyTimes), median(deleteTimes)
	if runs > 1 {
		fmt.Printf("  runs: %d; apply times %v\n", runs, applyTimes)
	}
	fmt.Printf("  converged (all applied, CSRs issued): %s (median)\n", apply.Round(time.Millisecond))
	fmt.Printf("  objects per second: %.0f\n", float64(objects)/apply.Seconds())
	fmt.Printf("  status saved in the store: %s after submit (median)\n", median(savedTimes).Round(time.Millisecond))
	fmt.Printf("  store writes per cluster (submit and status, one rollout): %.2f\n", writesPerRun[0])
	fmt.Printf("  deleted everything, status saved: %s (median)\n", del.Round(time.Millisecond))
	fmt.Printf("  peak RSS of this process (engine, embedded store, stand-ins): %s\n", peakRSS())
	return nil
}

// openStore opens an embedded store in a new directory, with its keyring
// line (for child replicas); closeStore closes it and removes the directory.
func openStore() (st *store.Store, keyLine string, closeStore func(), err error) {
	dir, err := os.MkdirTemp("", "rsync-bench-")
	if err != nil {
		return nil, "", nil, err
	}
	keyLine = secrets.NewKeyLine("bench")
	kr, err := secrets.ParseKeyring(keyLine)
	if err == nil {
		st, err = store.Open(store.Config{Database: "bench", DataDir: dir, Keyring: kr}, zap.NewNop())
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", nil, err
	}
	return st, keyLine, func() {
		st.Close(context.Background())
		_ = os.RemoveAll(dir)
	}, nil
}

// memprofile is the -memprofile flag.
var memprofile string

// writeHeap writes a heap profile (after a collection) to path.
func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func waitSettled(ctx context.Context, e *engine.Engine, owner string, want rsyncv1.State) error {
	for {
		st, err := e.Status(ctx, owner)
		if errs.Code(err) == codes.NotFound && want == rsyncv1.State_STATE_DELETED {
			return nil // deleted and already purged
		}
		if err != nil {
			return err
		}
		if st.GetSettled() {
			if st.GetState() != want {
				return fmt.Errorf("rollout %s settled %s, not %s (ready %d/%d)", owner, st.GetState(), want, st.GetReady(), st.GetTotal())
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// peakRSS reads VmHWM from /proc/self/status.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return fmt.Sprintf("%d MiB", kb/1024)
		}
	}
	return "unknown"
}

// benchReal starts n real clusters and runs the workload on them.
func benchReal(n, runs int, set []string) error {
	ctx := context.Background()
	root, err := kubetest.RepoRoot()
	if err != nil {
		return err
	}
	bin, err := kubetest.Build(ctx, root)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "rsync-bench-clusters-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	h, err := kubetest.Start(ctx, kubetest.Options{Dir: dir, EtcdDir: filepath.Join(dir, "etcd"), N: n, BinDir: bin})
	if err != nil {
		return err
	}
	defer h.Stop()
	conn := engine.Clusters[*engine.Kube]{}
	var clusterKeys []string
	for _, c := range h.Clusters {
		k, err := engine.NewKube(c.Kubeconfig)
		if err != nil {
			return err
		}
		conn["real/"+c.Name] = k
		clusterKeys = append(clusterKeys, "real/"+c.Name)
	}
	fmt.Printf("\nreal: %d clusters (kube-apiserver + kube-controller-manager on this machine), %d runs\n", n, runs)
	return bench(conn, clusterKeys, set, engine.Config{}, runs, topology{replicas: 1})
}

// lcSet is what a logical cloud puts on each cluster: 8 objects.
func lcSet(ns, csr string) []string {
	return []string{
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": %q, "labels": {"dcm.io/logical-cloud": %q}}}`, ns, ns),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tenant", "namespace": %q}}`, ns),
		fmt.Sprintf(`{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "tenant", "namespace": %q},
 "rules": [{"apiGroups": ["", "apps"], "resources": ["pods", "deployments", "configmaps"], "verbs": ["get", "list", "create", "delete"]}]}`, ns),
		fmt.Sprintf(`{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "tenant", "namespace": %q},
 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant"},
 "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "tenant-user"}]}`, ns),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "tenant", "namespace": %q},
 "spec": {"hard": {"cpu": "8", "memory": "32Gi", "pods": "100"}}}`, ns),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "tenant", "namespace": %q},
 "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"}}]}}`, ns),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tenant", "namespace": %q}, "data": {"owner": "bench"}}`, ns),
		csr,
	}
}

func csrManifest() (string, error) {
	csr, _, err := kube.NewCSR("tenant-user", "bench")
	if err != nil {
		return "", err
	}
	return kube.CSRManifest("tenant-user", csr, nil), nil
}

// runEngine runs e until the returned stop is called; stop waits for it
// to end.
func runEngine(e *engine.Engine) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "engine:", err)
		}
	}
}
