package istiotest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dcm-project/dcm/platform/kubetest"
)

// IstiodOptions say which control plane an istiod is: the values DCM's
// rendered istiod-<revision> Deployment would give it.
type IstiodOptions struct {
	// Revision is the control plane's revision (REVISION): istiod reads its
	// mesh config from the ConfigMap istio-<Revision>.
	Revision string
	// Namespace is istiod's namespace (-n, POD_NAMESPACE), where it finds
	// the cacerts Secret and that ConfigMap.
	Namespace string
	// ClusterID is the cluster's name in the mesh (--clusterID, CLUSTER_ID).
	ClusterID string
	// Kubeconfig is the file istiod uses; default the cluster's admin
	// kubeconfig.
	Kubeconfig string
	// Env adds environment variables (KEY=value), after the harness's own.
	Env []string
	// Ready is how long to wait for /ready; default 3 minutes.
	Ready time.Duration
}

// Istiod is a running istiod.
type Istiod struct {
	// SecureGRPCAddr is the CA's and xDS's TLS gRPC address (15012 in a
	// Pod): CreateCertificate is served here.
	SecureGRPCAddr string
	// HTTPAddr serves /ready and /debug/* (8080 in a Pod).
	HTTPAddr string
	// MonitoringAddr serves /metrics (15014 in a Pod).
	MonitoringAddr string
	// LogPath is istiod's stdout and stderr.
	LogPath string
	// CADir is ROOT_CA_DIR: istiod writes the cacerts Secret's keys here.
	CADir string
	// Started is how long istiod took from exec to /ready answering 200.
	Started time.Duration

	namespace string

	cmd  *exec.Cmd
	done chan struct{}
}

// StartIstiod builds istiod if needed (Build) and starts it as a local
// process against cluster c, out of cluster: loopback ports picked free (so
// several run side by side), USE_REMOTE_CERTS=true with an empty ROOT_CA_DIR
// (it loads the cacerts Secret of opts.Namespace from the cluster), and an
// empty working directory (no ./etc/istio/config/mesh, so it reads the
// istio-<revision> ConfigMap). It waits for /ready and fails the test
// otherwise. The process is killed at the test's cleanup, and its log is
// printed if the test failed.
func StartIstiod(ctx context.Context, t testing.TB, c *kubetest.Cluster, opts IstiodOptions) *Istiod {
	t.Helper()
	if opts.Revision == "" || opts.Namespace == "" || opts.ClusterID == "" {
		t.Fatalf("StartIstiod: Revision, Namespace and ClusterID are required, got %+v", opts)
	}
	root, err := kubetest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := Build(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Kubeconfig == "" {
		opts.Kubeconfig = c.KubeconfigPath
	}
	if opts.Ready == 0 {
		opts.Ready = 3 * time.Minute
	}
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	caDir := filepath.Join(dir, "cacerts")
	for _, d := range []string{work, caDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	ports, err := kubetest.FreePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	d := &Istiod{
		HTTPAddr: addr(0), SecureGRPCAddr: addr(2), MonitoringAddr: addr(4),
		LogPath: filepath.Join(dir, "istiod-"+opts.Revision+".log"), CADir: caDir, namespace: opts.Namespace,
	}
	logf, err := os.Create(d.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = exec.Command(bin, "discovery",
		"--kubeconfig", opts.Kubeconfig, "-n", opts.Namespace, "--clusterID", opts.ClusterID,
		"--httpAddr", d.HTTPAddr, "--grpcAddr", addr(1), "--secureGRPCAddr", d.SecureGRPCAddr,
		"--httpsAddr", addr(3), "--monitoringAddr", d.MonitoringAddr,
		"--ctrlz_address", "127.0.0.1", "--ctrlz_port", strconv.Itoa(ports[5]),
		"--shutdownDuration", "1s")
	d.cmd.Dir = work
	d.cmd.Env = append(os.Environ(),
		"REVISION="+opts.Revision, "POD_NAMESPACE="+opts.Namespace,
		"POD_NAME=istiod-"+opts.Revision+"-test", "CLUSTER_ID="+opts.ClusterID,
		"USE_REMOTE_CERTS=true", "ROOT_CA_DIR="+caDir)
	d.cmd.Env = append(d.cmd.Env, opts.Env...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := d.cmd.Start(); err != nil {
		_ = logf.Close()
		t.Fatalf("start istiod: %v", err)
	}
	d.done = make(chan struct{})
	go func() {
		_ = d.cmd.Wait()
		_ = logf.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.Stop()
		if t.Failed() {
			t.Logf("istiod %s log (%s):\n%s", opts.Revision, d.LogPath, d.LogTail(200))
		}
	})
	err = pollUntil(ctx, opts.Ready, func() error {
		if d.Exited() {
			return fmt.Errorf("istiod exited: %s", d.cmd.ProcessState)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.HTTPAddr+"/ready", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("istiod /ready: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("istiod %s on %s: %v", opts.Revision, c.Name, err)
	}
	d.Started = time.Since(start)
	return d
}

// ReloadCACerts copies the cluster's cacerts Secret into CADir again, as
// the kubelet refreshes the chart's /etc/cacerts mount in a Pod:
// USE_REMOTE_CERTS reads the Secret only at start. istiod's file watcher
// then takes a new intermediate under the same roots, or a root bundle that
// is a subset or superset of the current one if ISTIO_MULTIROOT_MESH=true
// (docs/mesh.md, section 4). Each file is written under a temporary name
// and renamed, so istiod never reads half a file.
func (d *Istiod) ReloadCACerts(ctx context.Context, c *kubetest.Cluster) error {
	client, err := c.HTTPClient()
	if err != nil {
		return err
	}
	var secret struct {
		Data map[string][]byte `json:"data"`
	}
	if err := getJSON(ctx, client, c.Server+"/api/v1/namespaces/"+d.namespace+"/secrets/cacerts", &secret); err != nil {
		return fmt.Errorf("read cacerts of %s on %s: %w", d.namespace, c.Name, err)
	}
	for key, data := range secret.Data {
		path := filepath.Join(d.CADir, filepath.Base(key))
		if err := os.WriteFile(path+".tmp", data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			return err
		}
	}
	return nil
}

// Exited says whether the process has ended.
func (d *Istiod) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// Stop kills istiod and waits for it.
func (d *Istiod) Stop() {
	if d.Exited() {
		return
	}
	_ = d.cmd.Process.Kill()
	<-d.done
}

// PID is istiod's process id.
func (d *Istiod) PID() int { return d.cmd.Process.Pid }

// RSS is istiod's resident memory in bytes (VmRSS of /proc/<pid>/status).
func (d *Istiod) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.PID()))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", d.PID())
}

// LogTail is the last n lines of istiod's log.
func (d *Istiod) LogTail(n int) string {
	b, err := os.ReadFile(d.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Get fetches a path of istiod's HTTP address (e.g. /debug/mesh).
func (d *Istiod) Get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.HTTPAddr+path, nil)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("istiod %s: %s: %s", path, resp.Status, buf.Bytes())
	}
	return buf.Bytes(), nil
}
