package deploytest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest"
)

// TestStoreServerOverlayRollingRestarts deploys DCM by its store-server
// overlay on cluster-1 (2 replicas of core and rsync) against a store
// server (dcm-store -host: FerretDB on the host's bridge address, which
// the pods reach; PostgreSQL behind it), each service with its own
// database user and keys from its Secrets, as docs/deploy.md says to by
// hand. Through the gateway's Service it applies logical clouds to
// cluster-2 while `kubectl rollout restart` replaces core's pods, then
// rsync's (an update of one of them and more applies in flight), and
// checks that nothing was lost or done twice: every logical cloud the API
// accepted is Instantiated, at the generation of the applies and updates
// it was given (none submitted twice), and has on cluster-2 exactly the
// objects its status lists (one CertificateSigningRequest per user, the
// namespace, RBAC, quota, LimitRange, NetworkPolicies), the update's
// quota included; the tenants' kubeconfigs work. It starts PostgreSQL,
// so it runs where make test and make test-store-server say it may
// (DCM_TEST_STORE_SERVER=1).
func TestStoreServerOverlayRollingRestarts(t *testing.T) {
	if os.Getenv("DCM_TEST_STORE_SERVER") == "" {
		t.Skip("starts PostgreSQL: run by make test or make test-store-server (DCM_TEST_STORE_SERVER=1)")
	}
	begin := time.Now()
	h := kubetest.ForTestsWithNodes(t, 2) // skips under -short
	c1, c2 := h.Clusters[0], h.Clusters[1]
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()

	store := startStoreServer(t, ctx, bridgeAddress(t, c1))
	prepareCluster(t, ctx, c1)
	token := adminToken(t, ctx, c1)
	storeSecrets(t, ctx, c1, store)
	deployOverlay(t, ctx, c1, "store-server")

	api := gatewayClient(t, ctx, c1, token)
	// The Deployments are Available before kube-dns answers for every
	// headless Service's new endpoints (a lookup of dcm-rsync failed once
	// right after, and of dcm-user and dcm-traffic in a core's first tell
	// of the facts: 503): wait until every DCM Service's name resolves
	// from the node, then until the registry, rsync's, answers.
	waitResolvable(t, ctx, c1, api.netns)
	api.waitFor(200, "/v2/cluster-providers", time.Minute)
	registerCluster(t, api, c2)
	api.want(201, "POST", "/v2/projects", `{"metadata":{"name":"roll"}}`)
	// generations: what each logical cloud was given (1: applied; 2:
	// applied, then updated).
	generations := map[string]int64{}
	next := 0
	apply := func() {
		next++
		name := fmt.Sprintf("lc-%d", next)
		lc := "/v2/projects/roll/logical-clouds/" + name
		api.want(201, "POST", "/v2/projects/roll/logical-clouds", tenantCloud(name, "roll-"+name))
		api.want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"local","cluster-name":"`+c2.Name+`"}`)
		api.want(202, "POST", lc+"/apply", "")
		generations[name] = 1
	}

	// Core's pods replaced while applies go on: two before the restart,
	// one as it starts and one more every 2 s until its rollout is done.
	apply()
	apply()
	restart(t, ctx, c1, "core", apply)
	for name := range generations {
		api.settle("/v2/projects/roll/logical-clouds/"+name, 3*time.Minute)
	}

	// rsync's, while lc-1 is updated (a quota added) and more are applied.
	lc1 := "/v2/projects/roll/logical-clouds/lc-1"
	api.want(201, "POST", lc1+"/cluster-quotas", `{"metadata":{"name":"rolled"},"spec":{"configmaps":7}}`)
	api.want(202, "POST", lc1+"/update", "")
	generations["lc-1"] = 2
	apply()
	restart(t, ctx, c1, "rsync", apply)

	// Nothing lost: every logical cloud the API accepted is listed and
	// Instantiated, each of its objects applied and on cluster-2. Nothing
	// twice: its generation is that of the applies and updates it was
	// given, and cluster-2 holds what its status lists and no more (a
	// second CertificateSigningRequest for its user would show).
	var listed []struct {
		Metadata struct{ Name string } `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(api.want(200, "GET", "/v2/projects/roll/logical-clouds", "")), &listed))
	var names []string
	for _, l := range listed {
		names = append(names, l.Metadata.Name)
	}
	require.ElementsMatch(t, keys(generations), names, "every logical cloud created is in the store")
	for name, gen := range generations {
		lc := "/v2/projects/roll/logical-clouds/" + name
		st := api.settle(lc, 3*time.Minute)
		require.Equal(t, gen, st.Generation, "%s: its rollout submitted once per apply or update", name)
		require.Equal(t, st.Total, st.Ready, name)
		require.Len(t, st.Clusters, 1, name)
		var want, deleted []string
		for _, r := range st.Clusters[0].Resources {
			switch r.State {
			case "applied":
				want = append(want, r.Kind+"/"+r.Name)
			case "deleted": // what an update no longer renders
				deleted = append(deleted, r.Kind+"/"+r.Name)
			default:
				t.Fatalf("%s: %s %s is %s", name, r.Kind, r.Name, r.State)
			}
		}
		have := labelledOn(t, ctx, c2, "roll", name)
		require.ElementsMatch(t, want, have, "%s: on %s, what its status lists as applied, each once", name, c2.Name)
		if gen == 1 {
			require.Empty(t, deleted, "%s: applied once, nothing removed", name)
		} else {
			// lc-1's update: its own quota replaces the default one
			// (rendered only while a logical cloud has none).
			require.Equal(t, []string{"ResourceQuota/default"}, deleted, "%s: what its update removed", name)
		}
		for _, kind := range []string{"Namespace", "Role", "RoleBinding", "ResourceQuota", "LimitRange", "NetworkPolicy", "CertificateSigningRequest"} {
			require.True(t, slices.ContainsFunc(have, func(o string) bool { return strings.HasPrefix(o, kind+"/") }), "%s: a %s on %s", name, kind, c2.Name)
		}
	}
	require.Contains(t, labelledOn(t, ctx, c2, "roll", "lc-1"), "ResourceQuota/rolled", "lc-1's update reached cluster-2")
	hard := c2.MustKubectl(ctx, t, "-n", "roll-lc-1", "get", "resourcequota", "rolled", "-o", "jsonpath={.spec.hard.configmaps}")
	require.Equal(t, "7", hard, "lc-1's updated quota")
	tenantWorks(t, ctx, api, c2, lc1, "roll-lc-1")
	last := fmt.Sprintf("lc-%d", next)
	tenantWorks(t, ctx, api, c2, "/v2/projects/roll/logical-clouds/"+last, "roll-"+last)
	requireNoRestarts(t, ctx, c1)
	t.Logf("%d logical clouds, every one Instantiated; the test took %s", len(generations), time.Since(begin).Round(time.Second))
}

// restart runs `kubectl rollout restart` of program's Deployment, calling
// during() at once and every 2 s until its rollout is done and its old
// pods are gone (each stops after its preStop pause, once the rollout is
// done); it checks that every pod of the program was replaced.
func restart(t *testing.T, ctx context.Context, c *kubetest.Cluster, program string, during func()) {
	t.Helper()
	pods := func() []string {
		out := c.MustKubectl(ctx, t, "-n", "dcm", "get", "pods", "-l", "app.kubernetes.io/name=dcm-"+program,
			"-o", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`)
		return strings.Fields(out)
	}
	before := pods()
	start := time.Now()
	c.MustKubectl(ctx, t, "-n", "dcm", "rollout", "restart", "deployment/dcm-"+program)
	done := make(chan error, 1)
	go func() {
		_, err := c.Kubectl(ctx, "-n", "dcm", "rollout", "status", "deployment/dcm-"+program, "--timeout=10m")
		done <- err
	}()
	during()
	calls, rolled := 1, time.Duration(0)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		select {
		case err := <-done:
			if err != nil {
				dumpPods(t, ctx, c, "dcm")
			}
			require.NoError(t, err, "rollout of dcm-%s", program)
			rolled = time.Since(start)
		case <-time.After(2 * time.Second):
			during()
			calls++
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		now := pods()
		if rolled > 0 && !slices.ContainsFunc(now, func(p string) bool { return slices.Contains(before, p) }) || time.Now().After(deadline) {
			require.NotZero(t, rolled, "the rollout of dcm-%s is done", program)
			require.Len(t, now, len(before), "dcm-%s keeps its replicas", program)
			for _, p := range now {
				require.NotContains(t, before, p, "dcm-%s: every pod replaced", program)
			}
			t.Logf("dcm-%s: rollout restart done in %s, its old pods gone after %s; %d logical clouds applied meanwhile",
				program, rolled.Round(time.Second), time.Since(start).Round(time.Second), calls)
			return
		}
	}
}

// labelledOn lists, as Kind/name, every object on c labelled as logical
// cloud lc of project's.
func labelledOn(t *testing.T, ctx context.Context, c *kubetest.Cluster, project, lc string) []string {
	t.Helper()
	sel := fmt.Sprintf("%s=%s,%s=%s", kube.ProjectLabel, project, kube.LogicalCloudLabel, lc)
	out := c.MustKubectl(ctx, t, "get", "-A", "-l", sel, "-o", "json",
		"namespaces,certificatesigningrequests,clusterroles,clusterrolebindings,roles,rolebindings,resourcequotas,limitranges,serviceaccounts,secrets,networkpolicies")
	var list struct {
		Items []struct {
			Kind     string
			Metadata struct{ Name string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	var objs []string
	for _, o := range list.Items {
		objs = append(objs, o.Kind+"/"+o.Metadata.Name)
	}
	return objs
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// bridgeAddress is the host's address on the bridge of c's harness
// (10.(200+slot).0.1, platform/kubetest/node.go): the API servers listen
// there, and the nodes' pods reach it through their node's default route.
func bridgeAddress(t *testing.T, c *kubetest.Cluster) string {
	t.Helper()
	u, err := url.Parse(c.Server)
	require.NoError(t, err)
	return u.Hostname()
}

// storeServer is a running dcm-store: its directory (URI files, the CA).
type storeServer struct{ dir string }

// startStoreServer builds dcm-store and runs it on a fresh directory with
// FerretDB on host, until the test ends.
func startStoreServer(t *testing.T, ctx context.Context, host string) storeServer {
	t.Helper()
	// Not t.TempDir: PostgreSQL's user must traverse the path when the
	// tests run as root, and TempDir's parent is 0700.
	dir, err := os.MkdirTemp("", "dcm-store-rolling-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o711))
	bin := filepath.Join(dir, "dcm-store")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/dcm-project/dcm/platform/store/cmd/dcm-store")
	build.Dir = repo
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build dcm-store: %s", out)

	s := storeServer{dir: filepath.Join(dir, "server")}
	cmd := exec.Command(bin, "-dir", s.dir, "-host", host)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	logf, err := os.Create(filepath.Join(dir, "dcm-store.log"))
	require.NoError(t, err)
	cmd.Stderr = logf
	require.NoError(t, cmd.Start())
	ended := make(chan struct{})
	serving := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			// Its lines name files and addresses, never a password.
			if strings.HasPrefix(sc.Text(), "serving") {
				close(serving)
			}
		}
		_ = cmd.Wait()
		close(ended)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		<-ended
		_ = logf.Close()
	})
	select {
	case <-serving:
	case <-ended:
		b, _ := os.ReadFile(logf.Name())
		t.Fatalf("dcm-store exited at start: %s", b)
	case <-time.After(2 * time.Minute):
		t.Fatal("dcm-store did not serve in 2 minutes")
	}
	return s
}

// storeSecrets creates each service's Secrets as docs/deploy.md says:
// dcm-mongo-<service> with its user's URI (its tlsCAFile the CA mounted
// beside it) and the store server's CA, dcm-kek-<service> with its keys
// derived from a root keyring. Everything goes through 0600 files, never
// a command line or the log.
func storeSecrets(t *testing.T, ctx context.Context, c *kubetest.Cluster, s storeServer) {
	t.Helper()
	dir := t.TempDir()
	kek := filepath.Join(dir, "dcm-kek")
	build := exec.CommandContext(ctx, "go", "build", "-o", kek, "github.com/dcm-project/dcm/platform/secrets/cmd/dcm-kek")
	build.Dir = repo
	out, err := build.CombinedOutput()
	require.NoError(t, err, "build dcm-kek: %s", out)
	root, err := exec.CommandContext(ctx, kek, "new", "-id", "k1").Output()
	require.NoError(t, err, "dcm-kek new")
	rootFile := filepath.Join(dir, "root-keyring")
	require.NoError(t, os.WriteFile(rootFile, root, 0o600))

	for _, prog := range programs(t) {
		if prog == "gateway" {
			continue // no store, no keys
		}
		b, err := os.ReadFile(filepath.Join(s.dir, "uri", "dcm-"+prog+".uri"))
		require.NoError(t, err, "dcm-store wrote dcm-%s's URI", prog)
		uri, err := url.Parse(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("dcm-%s's URI does not parse", prog) // url's errors quote it, password and all
		}
		q := uri.Query()
		q.Set("tlsCAFile", "/etc/dcm/mongo/ca.crt")
		uri.RawQuery = q.Encode()
		uriFile := filepath.Join(dir, prog+".uri")
		require.NoError(t, os.WriteFile(uriFile, []byte(uri.String()), 0o600))
		c.MustKubectl(ctx, t, "-n", "dcm", "create", "secret", "generic", "dcm-mongo-"+prog,
			"--from-file=uri="+uriFile, "--from-file=ca.crt="+filepath.Join(s.dir, "tls", "ca.crt"))

		keys, err := exec.CommandContext(ctx, kek, "derive", "-service", prog, "-f", rootFile).Output()
		require.NoError(t, err, "dcm-kek derive -service %s", prog)
		keysFile := filepath.Join(dir, prog+".keyring")
		require.NoError(t, os.WriteFile(keysFile, keys, 0o600))
		c.MustKubectl(ctx, t, "-n", "dcm", "create", "secret", "generic", "dcm-kek-"+prog, "--from-file=keyring="+keysFile)
	}
}

// waitResolvable waits (up to a minute) until the cluster DNS answers an
// address for every Service of namespace dcm, asked from the node's
// network namespace netns as a pod asks it (dig, at c.DNSIP()).
func waitResolvable(t *testing.T, ctx context.Context, c *kubetest.Cluster, netns string) {
	t.Helper()
	names := strings.Fields(c.MustKubectl(ctx, t, "-n", "dcm", "get", "services", "-o", "jsonpath={.items[*].metadata.name}"))
	require.NotEmpty(t, names)
	start := time.Now()
	for _, name := range names {
		fqdn := name + ".dcm.svc.cluster.local"
		for {
			out, err := exec.CommandContext(ctx, "ip", "netns", "exec", netns, "dig", "+short", "+time=1", "+tries=1", "@"+c.DNSIP(), fqdn).CombinedOutput()
			if err == nil && strings.TrimSpace(string(out)) != "" {
				break
			}
			if time.Since(start) > time.Minute {
				t.Fatalf("%s does not resolve after %s: %v %s", fqdn, time.Since(start).Round(time.Second), err, out)
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	t.Logf("every DCM Service's name (%d) resolves after %s", len(names), time.Since(start).Round(100*time.Millisecond))
}
