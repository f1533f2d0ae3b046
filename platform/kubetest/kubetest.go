// Package kubetest starts real Kubernetes control planes for tests, benchmarks
// and local runs (`make clusters`): one etcd (Debian's etcd-server) and, per
// cluster, a kube-apiserver with RBAC and a kube-controller-manager running
// the csrsigning, resourcequota, namespace, garbagecollector,
// serviceaccount (each namespace's default ServiceAccount, which pod
// admission needs) and serviceaccount-token controllers. The two Kubernetes binaries are built
// from the k8s.io/kubernetes module pinned in test/k8s (a tools module kept
// out of the product's go.work) into bin/k8s.
//
// Each cluster has its own CA, which signs its serving certificate, its
// admin client certificate (group system:masters) and the certificates its
// CSR signer issues. Its admin kubeconfig, with every credential inline, is
// written to <dir>/cluster-<i>.kubeconfig.
//
// There are no nodes: pods are never scheduled. That is enough for what DCM
// does to a cluster (namespaces, RBAC, CSRs, quotas, CRDs and custom
// resources, ServiceAccount tokens).
//
// It must not be imported by product code.
package kubetest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dcm-project/dcm/platform/pki"
)

// Options say where and how many.
type Options struct {
	// Dir holds every cluster's files: certificates, kubeconfigs, logs.
	Dir string
	// EtcdDir is etcd's data directory (default Dir/etcd); a tmpfs path
	// makes tests faster.
	EtcdDir string
	// N is the number of clusters.
	N int
	// BinDir holds kube-apiserver and kube-controller-manager (see Build).
	BinDir string
	// Detach starts processes in their own session, so they outlive the
	// caller (`make clusters`); otherwise they die with it.
	Detach bool
	// Nodes gives each cluster one node (0: none; see node.go), and the
	// cluster a kube-scheduler and the controllers pods need.
	Nodes int
	// Images are OCI image tarballs (bin/images, `make images`) loaded
	// into every node's containerd.
	Images []string
}

// Harness is a running set of clusters over one etcd.
type Harness struct {
	opts     Options
	etcd     *process
	etcdURL  string
	Clusters []*Cluster

	net       network // with nodes
	stateFile string  // with nodes: nodes.json, what teardown needs
}

// Cluster is one control plane.
type Cluster struct {
	// Name is "cluster-<i>", i from 1.
	Name string
	// Server is the API server's URL.
	Server string
	// KubeconfigPath is the admin kubeconfig's file; Kubeconfig its text.
	KubeconfigPath string
	Kubeconfig     []byte
	// CA is the cluster's CA: it signs the serving certificate, client
	// certificates and CSRs.
	CA *pki.CA

	h           *Harness
	dir         string
	host        string // the API server's address
	serviceCIDR string
	port        int
	adminCert   []byte
	adminKey    []byte

	mu        sync.Mutex
	apiserver *process
	kcm       *process
	scheduler *process
	node      *node
}

// Start starts etcd and opts.N clusters and waits until each is ready.
// On error, whatever was started is stopped.
func Start(ctx context.Context, opts Options) (_ *Harness, err error) {
	if opts.N < 1 {
		return nil, fmt.Errorf("kubetest: N must be at least 1, got %d", opts.N)
	}
	if opts.Nodes < 0 || opts.Nodes > 1 {
		return nil, fmt.Errorf("kubetest: a cluster has 0 or 1 node, not %d", opts.Nodes)
	}
	if opts.EtcdDir == "" {
		opts.EtcdDir = filepath.Join(opts.Dir, "etcd")
	}
	for _, bin := range []string{"kube-apiserver", "kube-controller-manager"} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("kubetest: %s is not built (make k8s-bins): %w", bin, err)
		}
	}
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("kubetest: etcd is not installed (apt-get install etcd-server): %w", err)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, err
	}
	h := &Harness{opts: opts}
	defer func() {
		if err != nil {
			h.Stop()
		}
	}()
	if opts.Nodes > 0 {
		for _, bin := range []string{"kube-scheduler", "kubelet", "kube-proxy", "kube-router"} {
			if _, err := os.Stat(filepath.Join(opts.BinDir, bin)); err != nil {
				return nil, fmt.Errorf("kubetest: %s is not built (make k8s-bins): %w", bin, err)
			}
		}
		h.stateFile = filepath.Join(opts.Dir, "nodes.json")
		if h.net, err = claimNetwork(ctx, h.stateFile); err != nil {
			return nil, err
		}
		if err := h.saveNodeState(); err != nil {
			return nil, err
		}
	}
	if err := h.startEtcd(ctx, etcdBin); err != nil {
		return nil, err
	}
	for i := 1; i <= opts.N; i++ {
		c, err := h.newCluster(i)
		if err != nil {
			return nil, err
		}
		h.Clusters = append(h.Clusters, c)
		if opts.Nodes > 0 {
			c.node = h.newNode(c, i)
			if err := h.saveNodeState(); err != nil {
				return nil, err
			}
			if err := c.node.plumb(ctx, h.net); err != nil {
				return nil, err
			}
		}
	}
	errc := make(chan error, len(h.Clusters))
	for _, c := range h.Clusters {
		go func() { errc <- c.start(ctx) }()
	}
	var errList []error
	for range h.Clusters {
		errList = append(errList, <-errc)
	}
	if err := errors.Join(errList...); err != nil {
		return nil, err
	}
	return h, nil
}

// Stop kills every process; with nodes, it also removes their pods,
// mounts, cgroups and network. Other files stay.
func (h *Harness) Stop() {
	for _, c := range h.Clusters {
		c.mu.Lock()
		if n := c.node; n != nil {
			for _, p := range []*process{n.router, n.proxy, n.kubelet, n.containerd} {
				p.kill()
			}
		}
		c.scheduler.kill()
		c.kcm.kill()
		c.apiserver.kill()
		c.mu.Unlock()
	}
	h.etcd.kill()
	if h.stateFile != "" {
		teardownState(h.stateFile)
	}
}

// saveNodeState records what teardown needs (nodes.json).
func (h *Harness) saveNodeState() error {
	st := nodeState{Owner: os.Getpid(), Net: h.net}
	if h.opts.Detach && h.etcd != nil {
		// `make clusters` exits; its clusters live as long as their etcd.
		st.Owner = h.etcd.pid()
	}
	st.OwnerStart, _ = processStart(st.Owner)
	for _, c := range h.Clusters {
		if c.node != nil {
			st.Netns = append(st.Netns, c.node.netns)
			st.Links = append(st.Links, c.node.link)
			st.Cgroups = append(st.Cgroups, c.node.cgroup)
			st.Dirs = append(st.Dirs, c.node.dir)
		}
	}
	return writeJSON(h.stateFile, st)
}

// Teardown removes what the nodes of the clusters in dir (started with
// Detach) left on the machine; the caller has stopped their processes.
func Teardown(dir string) { teardownState(filepath.Join(dir, "nodes.json")) }

// PIDs lists the processes' ids, etcd last (what `make clusters-down` kills).
func (h *Harness) PIDs() []int {
	var pids []int
	for _, c := range h.Clusters {
		pids = append(pids, c.apiserver.pid(), c.kcm.pid())
		if c.scheduler != nil {
			pids = append(pids, c.scheduler.pid())
		}
	}
	return append(pids, h.etcd.pid())
}

func (h *Harness) startEtcd(ctx context.Context, bin string) error {
	ports, err := FreePorts(2)
	if err != nil {
		return err
	}
	h.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	if err := os.RemoveAll(h.opts.EtcdDir); err != nil {
		return err
	}
	h.etcd, err = h.spawn(filepath.Join(h.opts.Dir, "etcd.log"), bin,
		"--name=dcm-test", "--data-dir="+h.opts.EtcdDir,
		"--listen-client-urls="+h.etcdURL, "--advertise-client-urls="+h.etcdURL,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=dcm-test="+peer, "--log-level=error")
	if err != nil {
		return err
	}
	return poll(ctx, 30*time.Second, func() error {
		if h.etcd.exited() {
			return fmt.Errorf("etcd %w: see %s", errExited, filepath.Join(h.opts.Dir, "etcd.log"))
		}
		resp, err := http.Get(h.etcdURL + "/health")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd /health: %s", resp.Status)
		}
		return nil
	})
}

// newCluster writes cluster i's certificates and kubeconfig.
func (h *Harness) newCluster(i int) (*Cluster, error) {
	name := "cluster-" + strconv.Itoa(i)
	c := &Cluster{Name: name, h: h, dir: filepath.Join(h.opts.Dir, name)}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, err
	}
	ports, err := FreePorts(1)
	if err != nil {
		return nil, err
	}
	c.port = ports[0]
	c.host = "127.0.0.1"
	c.serviceCIDR = "10.0.0.0/24"
	if h.opts.Nodes > 0 {
		// The node, in its own network namespace, reaches the API server
		// at the host's address on the bridge.
		c.host, c.serviceCIDR = h.net.HostIP, h.net.serviceCIDR(i)
	}
	c.Server = fmt.Sprintf("https://%s:%d", c.host, c.port)
	if c.CA, err = pki.NewCA(name+"-ca", 365*24*time.Hour); err != nil {
		return nil, err
	}
	caKey, err := pki.KeyPEM(c.CA.Key)
	if err != nil {
		return nil, err
	}
	serving, servingKey, err := c.CA.Issue(pki.Request{
		Identity: pki.Identity{Subject: "kube-apiserver"},
		Hosts: []string{"127.0.0.1", "localhost", "kubernetes.default.svc", "kubernetes.default",
			"kubernetes", c.host, firstServiceIP(c.serviceCIDR)},
		Server: true, NotAfter: time.Now().Add(365 * 24 * time.Hour),
	})
	if err != nil {
		return nil, err
	}
	c.adminCert, c.adminKey, err = c.CA.Issue(pki.Request{
		Identity: pki.Identity{Subject: "admin", Role: "system:masters"},
		Client:   true, NotAfter: time.Now().Add(365 * 24 * time.Hour),
	})
	if err != nil {
		return nil, err
	}
	// ServiceAccount tokens are signed by a key of their own.
	sa, err := pki.NewCA(name+"-service-accounts", time.Hour)
	if err != nil {
		return nil, err
	}
	saKey, err := pki.KeyPEM(sa.Key)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&sa.Key.PublicKey)
	if err != nil {
		return nil, err
	}
	c.Kubeconfig = kubeconfig(name, c.Server, pki.CertPEM(c.CA.Cert.Raw), c.adminCert, c.adminKey)
	c.KubeconfigPath = filepath.Join(h.opts.Dir, name+".kubeconfig")
	files := map[string][]byte{
		"ca.crt": pki.CertPEM(c.CA.Cert.Raw), "ca.key": caKey,
		"serving.crt": serving, "serving.key": servingKey,
		"admin.crt": c.adminCert, "admin.key": c.adminKey,
		"sa.key": saKey, "sa.pub": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
	}
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(c.dir, f), data, 0o600); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(c.KubeconfigPath, c.Kubeconfig, 0o600); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Cluster) file(name string) string { return filepath.Join(c.dir, name) }

func (c *Cluster) start(ctx context.Context) error {
	if err := c.StartAPIServer(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	controllers := "csrsigning,resourcequota,namespace,garbagecollector,serviceaccount,serviceaccount-token"
	if c.node != nil {
		// Every controller on by default: Deployments, ReplicaSets,
		// EndpointSlices, node lifecycle, pod GC ...
		controllers = "*"
	}
	var err error
	c.kcm, err = c.h.spawn(c.file("kube-controller-manager.log"), filepath.Join(c.h.opts.BinDir, "kube-controller-manager"),
		"--kubeconfig="+c.KubeconfigPath,
		"--controllers="+controllers,
		"--cluster-signing-cert-file="+c.file("ca.crt"), "--cluster-signing-key-file="+c.file("ca.key"),
		"--service-account-private-key-file="+c.file("sa.key"), "--root-ca-file="+c.file("ca.crt"),
		"--use-service-account-credentials=false", "--leader-elect=false",
		"--secure-port=0", "--concurrent-resource-quota-syncs=5", "--resource-quota-sync-period=10s",
		"--v=1")
	if err != nil || c.node == nil {
		return err
	}
	cert, key, err := c.CA.Issue(pki.Request{Identity: pki.Identity{Subject: "system:kube-scheduler"},
		Client: true, NotAfter: time.Now().Add(365 * 24 * time.Hour)})
	if err != nil {
		return err
	}
	kc := c.file("kube-scheduler.kubeconfig")
	if err := os.WriteFile(kc, kubeconfig(c.Name, c.Server, pki.CertPEM(c.CA.Cert.Raw), cert, key), 0o600); err != nil {
		return err
	}
	if c.scheduler, err = c.h.spawn(c.file("kube-scheduler.log"), filepath.Join(c.h.opts.BinDir, "kube-scheduler"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0", "--v=1"); err != nil {
		return err
	}
	if err := c.node.start(ctx, c.h.opts.Images); err != nil {
		return err
	}
	// Cluster DNS, where make images built its image (dns.go).
	if slices.ContainsFunc(c.h.opts.Images, func(p string) bool { return filepath.Base(p) == dnsTarball }) {
		return c.StartDNS(ctx)
	}
	return nil
}

// firstServiceIP is the kubernetes Service's address: the range's first.
func firstServiceIP(cidr string) string {
	p := netip.MustParsePrefix(cidr)
	return p.Addr().Next().String()
}

// StartAPIServer (re)starts the cluster's API server, on the same port and
// state, and waits until /readyz answers ok.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiserver != nil && !c.apiserver.exited() {
		return fmt.Errorf("%s: API server is already running", c.Name)
	}
	args := []string{"--etcd-servers=" + c.h.etcdURL, "--etcd-prefix=/" + c.Name,
		"--bind-address=" + c.host, "--advertise-address=" + c.host, "--secure-port=" + strconv.Itoa(c.port),
		"--tls-cert-file=" + c.file("serving.crt"), "--tls-private-key-file=" + c.file("serving.key"),
		"--client-ca-file=" + c.file("ca.crt"),
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file=" + c.file("sa.pub"),
		"--service-account-signing-key-file=" + c.file("sa.key"), "--api-audiences=https://kubernetes.default.svc",
		"--service-cluster-ip-range=" + c.serviceCIDR,
		// Privileged containers are allowed as on a cluster with nodes, so
		// that Pod Security Admission, not validation, is what refuses them.
		"--allow-privileged=true",
		"--cert-dir=" + c.file("certs"), "--enable-priority-and-fairness=false", "--v=1"}
	if c.node == nil {
		args = append(args, "--authorization-mode=RBAC", "--endpoint-reconciler-type=none")
	} else {
		// The kubelet's credential is system:node:<name>: the Node
		// authorizer and NodeRestriction confine it to its node's objects.
		// The API server reaches kubelets (logs, exec) with the admin
		// credential.
		args = append(args, "--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
			"--kubelet-client-certificate="+c.file("admin.crt"), "--kubelet-client-key="+c.file("admin.key"),
			"--kubelet-preferred-address-types=InternalIP",
			// The API server runs on the host, outside the node's network
			// namespace where kube-proxy routes Service addresses: it calls
			// webhooks (istiod's injector) at a ready endpoint of their
			// Service, a pod address the host routes to the node (plumb).
			"--enable-aggregator-routing=true")
	}
	var err error
	c.apiserver, err = c.h.spawn(c.file("kube-apiserver.log"), filepath.Join(c.h.opts.BinDir, "kube-apiserver"), args...)
	if err != nil {
		return err
	}
	proc := c.apiserver
	return poll(ctx, 90*time.Second, func() error {
		if proc.exited() {
			return fmt.Errorf("%s: kube-apiserver %w: see %s", c.Name, errExited, c.file("kube-apiserver.log"))
		}
		return c.ready(ctx)
	})
}

// StopAPIServer kills the cluster's API server (its state stays in etcd):
// the cluster is offline until StartAPIServer.
func (c *Cluster) StopAPIServer() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.apiserver.kill()
}

// ready asks /readyz with the admin credential.
func (c *Cluster) ready(ctx context.Context) error {
	_, err := c.get(ctx, "/readyz")
	return err
}

// get reads path from the API server with the admin credential, within
// 5 s; anything but 200 is an error.
func (c *Cluster) get(ctx context.Context, path string) ([]byte, error) {
	client, err := c.HTTPClient()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s", c.Name, path, resp.Status)
	}
	return body, nil
}

// HTTPClient is an HTTPS client with the admin credential.
func (c *Cluster) HTTPClient() (*http.Client, error) {
	pair, err := tls.X509KeyPair(c.adminCert, c.adminKey)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.CA.Cert)
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12,
	}}}, nil
}

func kubeconfig(name, server string, ca, cert, key []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: %[2]s
    certificate-authority-data: %[3]s
users:
- name: %[1]s-admin
  user:
    client-certificate-data: %[4]s
    client-key-data: %[5]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: %[1]s-admin
current-context: %[1]s
`, name, server, b64(ca), b64(cert), b64(key)))
}

// process is a started program.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (h *Harness) spawn(logPath, bin string, args ...string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if h.opts.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) pid() int {
	if p == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill ends the process and waits for it.
func (p *process) kill() {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// FreePorts finds n unused loopback ports, distinct, below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range): the ports the kernel
// picks for outgoing connections and for listens on port 0 come from that
// range, so a port found here is not taken by one of those between now and
// the listen of the program told it (a port from Listen(":0") was, under a
// loaded machine: "address already in use"). Each is chosen at random in
// [10000, the range's start) and checked by listening on it; all are held
// until the last is found. A port is handed out once per process: a test
// whose program has stopped and freed its port does not see it given to
// another test's program before it restarts on it.
func FreePorts(n int) ([]int, error) {
	low := 32768
	if data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(data)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 10000+n {
				low = v
			}
		}
	}
	var ports []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("kubetest: no free loopback port below %d after 1000 tries", low)
		}
		port := 10000 + rand.IntN(low-10000)
		if !handOut(port) {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		lns = append(lns, ln)
		ports = append(ports, port)
	}
	return ports, nil
}

// handedOut is every port FreePorts has given in this process.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// handOut marks port given and says whether it was not given before.
func handOut(port int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports[port] {
		return false
	}
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	handedOut.ports[port] = true
	return true
}

// FreeAddr is a loopback address ("127.0.0.1:<port>") of FreePorts.
func FreeAddr() (string, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])), nil
}

// errExited is a process that ended while poll waited for it.
var errExited = errors.New("exited")

// poll calls f until it succeeds, fails with errExited, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		err := f()
		if err == nil || errors.Is(err, errExited) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", timeout, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RepoRoot is the directory holding go.work: the one the GOWORK
// environment variable names, as the go command uses it, or else the first
// found upwards from the working directory.
func RepoRoot() (string, error) {
	if w := os.Getenv("GOWORK"); w != "" && w != "off" && filepath.IsAbs(w) {
		return filepath.Dir(w), nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubetest: no go.work above the working directory")
		}
		dir = parent
	}
}

var kubernetesVersion = regexp.MustCompile(`(?m)^\s*(?:require\s+)?k8s\.io/kubernetes (v(\d+)\.(\d+)\.\d+)\s*$`)

// toolBuild runs go build with args in the tools module dir (outside the
// workspace: GOWORK=off); a failure carries go's output.
func toolBuild(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", append([]string{"build"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build in %s: %w\n%s", dir, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// Build builds kube-apiserver, kube-controller-manager, kubectl and the
// node's kube-scheduler, kubelet and kube-proxy from test/k8s, and
// kube-router from test/kube-router, into root/bin/k8s and returns that
// directory. go build leaves binaries
// that are up to date untouched, so a warm call costs a few seconds.
func Build(ctx context.Context, root string) (string, error) {
	bin := filepath.Join(root, "bin", "k8s")
	dir := filepath.Join(root, "test", "k8s")
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	m := kubernetesVersion.FindSubmatch(mod)
	if m == nil {
		return "", errors.New("test/k8s/go.mod does not require k8s.io/kubernetes")
	}
	// The version the binaries report, as Kubernetes' own build stamps it.
	v := "k8s.io/component-base/version"
	ldflags := fmt.Sprintf("-X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=%[3]s -X %[1]s.gitMinor=%[4]s", v, m[1], m[2], m[3])
	if err := toolBuild(ctx, dir, "-ldflags="+ldflags, "-o", bin+"/",
		"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kubectl",
		"k8s.io/kubernetes/cmd/kube-scheduler", "k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-proxy"); err != nil {
		return "", err
	}
	// The nodes' NetworkPolicy firewall, from its own tools module.
	if err := toolBuild(ctx, filepath.Join(root, "test", "kube-router"), "-o", bin+"/",
		"github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"); err != nil {
		return "", err
	}
	return bin, nil
}
