package allinone_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// dcmctl runs the real dcmctl binary (cmd/dcmctl, built once per test)
// against a running program.
type dcmctl struct {
	t   *testing.T
	bin string
	dir string
	env []string
}

// buildDcmctl builds cmd/dcmctl into dir.
func buildDcmctl(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command builds dcmctl")
	bin := filepath.Join(dir, "dcmctl")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/dcm-project/dcm/cmd/dcmctl").CombinedOutput()
	require.NoError(t, err, "go build dcmctl: %s", out)
	return bin
}

// run runs dcmctl with args (stdin: in) and returns stdout, stderr and the
// exit code.
func (d *dcmctl) run(in string, args ...string) (string, string, int) {
	d.t.Helper()
	cmd := exec.Command(d.bin, args...)
	cmd.Dir = d.dir
	cmd.Env = append(os.Environ(), d.env...)
	cmd.Stdin = strings.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(d.t, err)
	}
	return stdout.String(), stderr.String(), code
}

// ok runs dcmctl and requires exit code 0; it returns stdout.
func (d *dcmctl) ok(args ...string) string {
	d.t.Helper()
	out, errOut, code := d.run("", args...)
	require.Equal(d.t, 0, code, "dcmctl %s:\n%s%s", strings.Join(args, " "), out, errOut)
	return out
}

// lines are the non-empty lines of s.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// The seed sequence as a dcmctl file, out of dependency order on purpose:
// apply sorts it.
const dcmctlSeed = `# the logical cloud first: apply puts it after its project
kind: LogicalCloud
project: ctl
metadata: {name: ctl-lc, description: dcmctl's logical cloud}
spec:
  namespace: ctl-ns
  user:
    user-name: ctl-user
    user-permissions:
    - {permission-name: configmaps, apiGroups: [""], resources: [configmaps], verbs: [get, list, create]}
---
kind: Project
metadata: {name: ctl, description: dcmctl}
---
kind: ClusterProvider
metadata: {name: ctl-edge}
---
kind: Cluster
provider: ctl-edge
kubeconfigFile: kc/cluster-1.kubeconfig
metadata: {name: cluster-1}
spec: {labels: [edge]}
---
kind: Cluster
provider: ctl-edge
kubeconfigFile: kc/cluster-2.kubeconfig
body:
  metadata: {name: cluster-2}
  spec: {labels: [edge]}
---
kind: ClusterReference
project: ctl
logicalCloud: ctl-lc
cluster-provider: ctl-edge
cluster-name: cluster-1
---
kind: ClusterReference
project: ctl
logicalCloud: ctl-lc
cluster-provider: ctl-edge
cluster-name: cluster-2
loadbalancer-ip: 10.10.0.2
---
kind: UserPermission
project: ctl
logicalCloud: ctl-lc
permission-name: deployments
apiGroups: [apps]
resources: [deployments]
verbs: [get, list]
---
kind: ClusterQuota
project: ctl
logicalCloud: ctl-lc
metadata: {name: quota-1}
spec: {configmaps: 10, requests.cpu: 2000m}
---
kind: KVPair
project: ctl
logicalCloud: ctl-lc
metadata: {name: kv-1}
spec:
  kv: [{db.host: 10.0.0.9}, {mode: edge}]
`

// TestDcmctl runs the dcmctl binary against the whole program on the real
// test clusters: login, apply twice, diff, get, errors, the lifecycle with
// a watched status under a terminal, a kubeconfig used with client-go,
// tokens, delete -f, and an emcoctl file.
func TestDcmctl(t *testing.T) {
	t.Parallel()
	h := kubetest.ForTests(t, 3)
	s := stacktest.Start(t)
	dir := t.TempDir()
	d := &dcmctl{t: t, bin: buildDcmctl(t, dir), dir: dir,
		env: []string{"HOME=" + dir, "DCMCTL_CONFIG=" + filepath.Join(dir, "config.yaml")}}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "files", "kc"), 0o700))
	for _, c := range h.Clusters {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "files", "kc", c.Name+".kubeconfig"), c.Kubeconfig, 0o600))
	}
	seed := filepath.Join(dir, "files", "seed.yaml")
	require.NoError(t, os.WriteFile(seed, []byte(dcmctlSeed), 0o600))
	pki := filepath.Join(s.DataDir, "pki")
	u, err := url.Parse(s.URL)
	require.NoError(t, err)

	t.Run("no config: the local install", func(t *testing.T) {
		d := *d
		d.t = t
		d.env = append(d.env, "DCM_DATA_DIR="+s.DataDir, "DCM_HTTP_ADDR="+u.Host)
		require.Equal(t, "NAME   DESCRIPTION\n", d.ok("get", "projects"))
		d.env = append(d.env, "DCM_DATA_DIR="+filepath.Join(dir, "nothing"))
		_, errOut, code := d.run("", "get", "projects")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "no config file and no local install")
	})

	t.Run("login", func(t *testing.T) {
		d := *d
		d.t = t
		_, errOut, code := d.run("", "login", "--server", s.URL, "--ca", pki+"/ca.crt", "--token", "dcm_0000000000000000_wrong")
		require.Equal(t, 1, code)
		require.Equal(t, 1, len(lines(errOut)), errOut)
		require.Contains(t, errOut, "Unauthenticated")
		out := d.ok("login", "--server", s.URL, "--ca", pki+"/ca.crt", "--cert", pki+"/admin.crt", "--key", pki+"/admin.key")
		require.Contains(t, out, `context "default"`)
		fi, err := os.Stat(filepath.Join(dir, "config.yaml"))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	})

	t.Run("apply twice, diff", func(t *testing.T) {
		d := *d
		d.t = t
		out := d.ok("apply", "-f", seed)
		require.Equal(t, []string{
			"Project/ctl created", "ClusterProvider/ctl-edge created", "Cluster/cluster-1 created",
			"Cluster/cluster-2 created", "LogicalCloud/ctl-lc created", "ClusterReference/cluster-1 created",
			"ClusterReference/cluster-2 created", "UserPermission/deployments created",
			"ClusterQuota/quota-1 created", "KVPair/kv-1 created",
		}, lines(out))
		// the second time from stdin (kubeconfigFile is then relative to
		// the working directory): nothing changes
		d.dir = filepath.Join(dir, "files")
		out, errOut, code := d.run(dcmctlSeed, "apply", "-f", "-")
		require.Equal(t, 0, code, errOut)
		require.Len(t, lines(out), 10)
		for _, l := range lines(out) {
			require.True(t, strings.HasSuffix(l, " unchanged"), out)
		}
		require.Equal(t, "no changes\n", d.ok("diff", "-f", seed))
	})

	t.Run("diff and apply a change", func(t *testing.T) {
		d := *d
		d.t = t
		changed := strings.Replace(dcmctlSeed, "requests.cpu: 2000m", "requests.cpu: 3", 1)
		changed = strings.Replace(changed, "loadbalancer-ip: 10.10.0.2", "loadbalancer-ip: 10.10.0.3", 1)
		f := filepath.Join(dir, "files", "changed.yaml")
		require.NoError(t, os.WriteFile(f, []byte(changed), 0o600))
		out, _, code := d.run("", "diff", "-f", f)
		require.Equal(t, 1, code, out)
		require.Equal(t, []string{
			"~ ClusterReference/cluster-2", `    loadbalancer-ip: "10.10.0.2" -> "10.10.0.3"`,
			"~ ClusterQuota/quota-1", `    spec.requests.cpu: "2" -> 3`,
		}, lines(out))
		out = d.ok("apply", "-f", f)
		require.Contains(t, out, "ClusterReference/cluster-2 configured\n")
		require.Contains(t, out, "ClusterQuota/quota-1 configured\n")
		require.Equal(t, 8, strings.Count(out, " unchanged\n"), out)
		require.Equal(t, "no changes\n", d.ok("diff", "-f", f))
		out = d.ok("apply", "-f", seed) // back
		require.Equal(t, 2, strings.Count(out, " configured\n"), out)
	})

	t.Run("get", func(t *testing.T) {
		d := *d
		d.t = t
		var projects []map[string]any
		require.NoError(t, json.Unmarshal([]byte(d.ok("get", "projects", "-o", "json")), &projects))
		require.Len(t, projects, 1)
		require.Equal(t, "dcmctl", projects[0]["metadata"].(map[string]any)["description"])
		require.Equal(t, []string{
			"NAME        PROVIDER   CLUSTER     LOADBALANCER-IP",
			"cluster-1   ctl-edge   cluster-1   <none>",
			"cluster-2   ctl-edge   cluster-2   10.10.0.2",
		}, lines(d.ok("get", "cluster-references", "-p", "ctl", "-l", "ctl-lc")))
		require.Equal(t, []string{
			"NAME     NAMESPACE   LEVEL      USER       STATE",
			"ctl-lc   ctl-ns      standard   ctl-user   Created",
		}, lines(d.ok("get", "lc", "-p", "ctl")))
		out := d.ok("get", "cluster-quota", "quota-1", "-p", "ctl", "-l", "ctl-lc", "-o", "yaml")
		require.Contains(t, out, "requests.cpu: \"2\"")

		_, errOut, code := d.run("", "get", "logical-cloud", "nope", "-p", "ctl")
		require.Equal(t, 1, code)
		require.Equal(t, []string{`error: NotFound: logical cloud "nope" not found in project "ctl" [HTTP 404]`}, lines(errOut))
		_, errOut, code = d.run("", "get", "clusters")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, `Cluster needs "provider"`)
	})

	t.Run("traffic and seed 002", func(t *testing.T) {
		d := *d
		d.t = t
		f := filepath.Join(dir, "files", "traffic.yaml")
		require.NoError(t, os.WriteFile(f, []byte(dcmctlTraffic), 0o600))
		require.Equal(t, []string{"LogicalCloud/ctl-lc2 created", "TrafficIntentGroup/g created", "IntraClusterIntent/m1 created"},
			lines(d.ok("apply", "-f", f)))
		require.Equal(t, []string{"LogicalCloud/ctl-lc2 unchanged", "TrafficIntentGroup/g unchanged", "IntraClusterIntent/m1 unchanged"},
			lines(d.ok("apply", "-f", f)))
		require.Equal(t, []string{"NAME   LOGICAL-CLOUD   DESCRIPTION", "g      ctl-lc          bookinfo traffic"},
			lines(d.ok("get", "tig", "-p", "ctl", "--composite-app", "bookinfo", "--app-version", "v1")))
		var lc map[string]any
		require.NoError(t, json.Unmarshal([]byte(d.ok("get", "lc", "ctl-lc2", "-p", "ctl", "-o", "json")), &lc))
		require.Equal(t, []any{"edge"}, lc["spec"].(map[string]any)["cluster-labels"], "seed 002's selector")
		// the group's lifecycle verbs (an apply that goes through needs a
		// mesh logical cloud: TestProgressiveTrafficGroupOnRealClusters, over REST)
		tg := []string{"g", "-p", "ctl", "--app", "bookinfo", "--version", "v1"}
		require.Equal(t, "ctl/bookinfo/v1/g: Created 0/0\n", d.ok(append([]string{"traffic-group", "status"}, tg...)...))
		_, errOut, code := d.run("", append([]string{"traffic-group", "apply"}, tg...)...)
		require.Equal(t, 1, code)
		require.Equal(t, []string{`error: FailedPrecondition: logical cloud "ctl-lc" is Created: traffic intents apply to an instantiated logical cloud (WRONG_STATE) [HTTP 409]`}, lines(errOut))
		_, errOut, code = d.run("", append([]string{"traffic-group", "terminate"}, tg...)...)
		require.Equal(t, 1, code)
		require.Contains(t, errOut, `traffic intent group "g" is Created: terminate needs it to be`)
		out, _, code := d.run("", append([]string{"traffic-group", "status", "--watch"}, tg...)...)
		require.Equal(t, 1, code)
		require.Equal(t, "ctl/bookinfo/v1/g: Created 0/0\ng is not applied\n", out)
		require.Equal(t, []string{"IntraClusterIntent/m1 deleted", "TrafficIntentGroup/g deleted", "LogicalCloud/ctl-lc2 deleted"},
			lines(d.ok("delete", "-f", f)))
	})

	t.Run("lifecycle, watched", func(t *testing.T) {
		d := *d
		d.t = t
		out := d.ok("logical-cloud", "apply", "ctl-lc", "-p", "ctl")
		require.Regexp(t, `^ctl/ctl-lc: Instantiat(ing|ed) \d+/\d+\n$`, out)
		// under a terminal (script(1) gives the command a pty): bars, redrawn
		term := watchInTerminal(t, d, "ctl-lc")
		require.Regexp(t, `ctl/ctl-lc: Instantiated (\d+)/(\d+)\n`, term)
		for _, c := range []string{"cluster-1", "cluster-2"} {
			require.Regexp(t, `\n  ctl-edge/`+c+` \[#{20}\] (\d+)/(\d+) applied\n`, term, "a full bar per cluster")
		}
		if views := strings.Count(term, "ctl/ctl-lc: "); views > 1 {
			require.Equal(t, views-1, strings.Count(term, "\x1b[J"), "each later view is drawn over the one before")
		}
		// not a terminal: plain lines, no bars
		out = d.ok("logical-cloud", "status", "ctl-lc", "-p", "ctl", "--watch")
		require.Regexp(t, `^ctl/ctl-lc: Instantiated (\d+)/(\d+)\n  ctl-edge/cluster-1 \d+/\d+ applied\n  ctl-edge/cluster-2 \d+/\d+ applied\n$`, out)
		m := regexp.MustCompile(`Instantiated (\d+)/(\d+)`).FindStringSubmatch(out)
		require.Equal(t, m[1], m[2], "all ready")

		_, errOut, code := d.run("", "logical-cloud", "apply", "ctl-lc", "-p", "ctl")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "(WRONG_STATE) [HTTP 409]")

		kc := filepath.Join(dir, "ctl-lc-cluster-1.yaml")
		require.Equal(t, "kubeconfig written to "+kc+"\n", d.ok("kubeconfig", "ctl-lc", "cluster-1", "-p", "ctl", "-o", kc))
		fi, err := os.Stat(kc)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		cfg, err := clientcmd.BuildConfigFromFlags("", kc)
		require.NoError(t, err)
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = cs.CoreV1().ConfigMaps("ctl-ns").List(ctx, metav1.ListOptions{})
		require.NoError(t, err, "the user may list configmaps in its namespace")
		_, err = cs.CoreV1().Secrets("ctl-ns").List(ctx, metav1.ListOptions{})
		require.Error(t, err, "and nothing it was not granted")

		out = d.ok("logical-cloud", "terminate", "ctl-lc", "-p", "ctl")
		require.Contains(t, out, "ctl/ctl-lc: Terminat")
		out = d.ok("logical-cloud", "status", "ctl-lc", "-p", "ctl", "--watch")
		require.Regexp(t, `ctl/ctl-lc: Terminated (\d+)/(\d+)\n  ctl-edge/cluster-1 \d+/\d+ deleted\n  ctl-edge/cluster-2 \d+/\d+ deleted\n$`, out, "the last view")
	})

	t.Run("tokens", func(t *testing.T) {
		d := *d
		d.t = t
		tok := strings.TrimSpace(d.ok("token", "create", "--subject", "alice", "--role", "reader", "--project", "ctl", "--ttl", "1h"))
		require.True(t, strings.HasPrefix(tok, "dcm_"), tok)
		d.ok("login", "--name", "alice", "--server", s.URL, "--ca", pki+"/ca.crt", "--token", tok)
		require.Contains(t, d.ok("get", "lc", "-p", "ctl"), "ctl-lc")
		d.ok("login", "--name", "default", "--server", s.URL, "--ca", pki+"/ca.crt", "--cert", pki+"/admin.crt", "--key", pki+"/admin.key")
		id := strings.Split(tok, "_")[1]
		list := lines(d.ok("token", "list"))
		require.Equal(t, "ID", strings.Fields(list[0])[0])
		found := false
		for _, l := range list[1:] {
			f := strings.Fields(l)
			found = found || len(f) >= 4 && f[0] == id && f[1] == "alice" && f[2] == "reader" && f[3] == "ctl"
		}
		require.True(t, found, "%s listed: %q", id, list)
		require.Equal(t, "token "+id+" revoked\n", d.ok("token", "revoke", id))
		_, errOut, code := d.run("", "--context", "alice", "get", "lc", "-p", "ctl")
		require.Equal(t, 1, code)
		require.Contains(t, errOut, "[HTTP 401]")
	})

	t.Run("delete -f", func(t *testing.T) {
		d := *d
		d.t = t
		out := d.ok("delete", "-f", seed)
		require.Equal(t, []string{
			"KVPair/kv-1 deleted", "ClusterQuota/quota-1 deleted", "UserPermission/deployments deleted",
			"ClusterReference/cluster-2 deleted", "ClusterReference/cluster-1 deleted", "LogicalCloud/ctl-lc deleted",
			"Cluster/cluster-2 deleted", "Cluster/cluster-1 deleted", "ClusterProvider/ctl-edge deleted", "Project/ctl deleted",
		}, lines(out))
		require.Equal(t, "NAME   DESCRIPTION\n", d.ok("get", "projects"))
		out = d.ok("delete", "-f", seed)
		require.Len(t, lines(out), 10)
		require.Equal(t, 10, strings.Count(out, " not found\n"))
	})

	t.Run("emcoctl file", func(t *testing.T) {
		d := *d
		d.t = t
		f := filepath.Join(dir, "files", "emco.yaml")
		require.NoError(t, os.WriteFile(f, []byte(emcoctlFile), 0o600))
		out := d.ok("apply", "-f", f)
		require.Equal(t, []string{
			"projects/emco created", "cluster-providers/emco-edge created", "cluster-providers/emco-edge/clusters/cluster-3 created",
			"projects/emco/logical-clouds/emco-lc created", "projects/emco/logical-clouds/emco-lc/cluster-references/cluster-3 created",
			"projects/emco/logical-clouds/emco-lc/user-permissions/pods created",
			"projects/emco/logical-clouds/emco-lc/cluster-quotas/q created",
			"projects/emco/logical-clouds/emco-lc/instantiate done",
		}, lines(out))
		out = d.ok("apply", "-f", f)
		require.Len(t, lines(out), 8)
		require.Equal(t, 8, strings.Count(out, " unchanged\n"), out)
		require.Contains(t, d.ok("get", "lc", "-p", "emco"), "emco-lc   emco-ns     standard   emco-user")
		require.Contains(t, d.ok("logical-cloud", "status", "emco-lc", "-p", "emco", "--watch"), "emco/emco-lc: Instantiated")
		d.ok("logical-cloud", "terminate", "emco-lc", "-p", "emco")
		d.ok("logical-cloud", "status", "emco-lc", "-p", "emco", "--watch")
		out = d.ok("delete", "-f", f)
		require.Equal(t, "projects/emco/logical-clouds/emco-lc/instantiate skipped (not an object)", lines(out)[0])
		require.Equal(t, 7, strings.Count(out, " deleted\n"), out)
	})
}

// dcmctlTraffic is a seed 002 logical cloud and a traffic intent group
// with an intent on the seed's logical cloud.
const dcmctlTraffic = `kind: IntraClusterIntent
project: ctl
compositeApp: bookinfo
version: v1
group: g
name: m1
description: productpage calls reviews
connectivityResource:
- {id: m1, name: reviews, port: "9080", protocol: HTTP, mutualTLS: "true"}
---
kind: TrafficIntentGroup
project: ctl
compositeApp: bookinfo
version: v1
name: g
description: bookinfo traffic
logical-cloud: ctl-lc
---
kind: LogicalCloud
project: ctl
name: ctl-lc2
cluster-labels: edge
`

// emcoctlFile is an emcoctl resource file in EMCO's shapes (as in EMCO's
// examples/dcm-advanced), its cluster's kubeconfig a file beside it.
const emcoctlFile = `---
version: emco/v2
resourceContext:
  anchor: projects
metadata:
  name: emco
---
version: emco/v2
resourceContext:
  anchor: cluster-providers
metadata:
  name: emco-edge
---
version: emco/v2
resourceContext:
  anchor: cluster-providers/emco-edge/clusters
metadata:
  name: cluster-3
file:
  kc/cluster-3.kubeconfig
---
version: emco/v2
resourceContext:
  anchor: projects/emco/logical-clouds
metadata:
  name: emco-lc
spec:
  namespace: emco-ns
  user:
    userName: emco-user
    type: certificate
---
version: emco/v2
resourceContext:
  anchor: projects/emco/logical-clouds/emco-lc/cluster-references
metadata:
  name: cluster-3
spec:
  clusterProvider: emco-edge
  cluster: cluster-3
  loadBalancerIP: "0.0.0.0"
---
version: emco/v2
resourceContext:
  anchor: projects/emco/logical-clouds/emco-lc/user-permissions
metadata:
  name: pods
spec:
  namespace: emco-ns
  apiGroups: [""]
  resources: [pods]
  verbs: [get, list]
---
version: emco/v2
resourceContext:
  anchor: projects/emco/logical-clouds/emco-lc/cluster-quotas
metadata:
  name: q
spec:
  pods: "10"
---
version: emco/v2
resourceContext:
  anchor: projects/emco/logical-clouds/emco-lc/instantiate
`

// watchInTerminal runs status --watch under script(1), which gives it a
// pseudo-terminal, and returns what it drew.
func watchInTerminal(t *testing.T, d dcmctl, lc string) string {
	t.Helper()
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatalf("script(1) (util-linux) is needed to run the watch under a terminal: %v", err)
	}
	cmdline := d.bin + " logical-cloud status " + lc + " -p ctl --watch"
	out, errOut, code := d.runBin("script", "-qefc", cmdline, "/dev/null")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	return strings.ReplaceAll(out, "\r\n", "\n")
}

// runBin runs another program with dcmctl's environment.
func (d *dcmctl) runBin(name string, args ...string) (string, string, int) {
	d.t.Helper()
	saved := d.bin
	defer func() { d.bin = saved }()
	d.bin = name
	return d.run("", args...)
}
