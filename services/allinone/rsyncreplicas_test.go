package allinone_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/cadist"
	"github.com/dcm-project/dcm/services/core"
	"github.com/dcm-project/dcm/services/gateway"
	"github.com/dcm-project/dcm/services/namespace"
	"github.com/dcm-project/dcm/services/quota"
	"github.com/dcm-project/dcm/services/rsync"
	"github.com/dcm-project/dcm/services/servicemesh"
	"github.com/dcm-project/dcm/services/traffic"
	"github.com/dcm-project/dcm/services/user"
)

// rsyncChildEnv makes this test binary run the resource synchronizer
// program (its flags in rsyncChildArgs, JSON) instead of the tests: the
// replicas TestRsyncReplicaKilledUnderTheSuite kills with SIGKILL.
const (
	rsyncChildEnv  = "DCM_ALLINONE_RSYNC_CHILD"
	rsyncChildArgs = "DCM_ALLINONE_RSYNC_ARGS"
)

// runRsyncChild runs one rsync program until SIGTERM.
func runRsyncChild() int {
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(rsyncChildArgs)), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	p, err := app.Start(ctx, rsync.Name, args, true, rsync.Build)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	if err := p.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestRsyncReplicaKilledUnderTheSuite runs the suite with the resource
// synchronizer as three processes and core as two programs, on one store
// (held by the namespace program), behind a gateway reaching every
// replica: a logical cloud on three real clusters is applied, the rsync
// replica working the most of its clusters is killed with SIGKILL at
// once, and the logical cloud still becomes Instantiated (its clusters
// taken over), then is terminated and deleted through the survivors.
func TestRsyncReplicaKilledUnderTheSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the suite as processes: not in -short (make test-unit)")
	}
	h := kubetest.ForTests(t, 3)
	data := t.TempDir()
	addrs := loopbackAddrs(t, map[string]int{rsync.Name: 3, core.Name: 2, namespace.Name: 1, user.Name: 1, quota.Name: 1,
		servicemesh.Name: 1, cadist.Name: 1, traffic.Name: 1})
	peers := peerFlags(addrs)
	ps := newProgramSet(t)
	ps.stopErrorsExpected = true // an rsync replica is killed under them
	start := func(name string, build app.Build, needStore bool, args ...string) *app.Program {
		t.Helper()
		p, _ := ps.start(name, build, needStore, slices.Concat([]string{"-data-dir", data}, peers, args)...)
		return p
	}
	first := start(namespace.Name, namespace.Build, true, "-grpc-addr", addrs[namespace.Name][0])
	uri := writeSecret(t, first.Env.Store.ClientURI())
	st := first.Env.Store

	kids := map[string]*exec.Cmd{}
	for i, addr := range addrs[rsync.Name] {
		name := fmt.Sprintf("rsync-%d", i)
		args, err := json.Marshal(slices.Concat([]string{"-data-dir", data, "-log-level", "warn", "-http-addr", ""}, peers,
			[]string{"-grpc-addr", addr, "-mongo-uri-file", uri, "-rsync-replica", name}))
		require.NoError(t, err)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), rsyncChildEnv+"=1", rsyncChildArgs+"="+string(args))
		cmd.Stderr = ps.logs
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		ps.add(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}
		})
		sc := bufio.NewScanner(out)
		require.True(t, sc.Scan(), "%s did not start", name)
		require.Equal(t, "ready", sc.Text())
		kids[name] = cmd
	}
	for _, p := range []struct {
		name  string
		build app.Build
	}{{core.Name, core.Build}, {user.Name, user.Build}, {quota.Name, quota.Build}, {servicemesh.Name, servicemesh.Build},
		{cadist.Name, cadist.Build}, {traffic.Name, traffic.Build}} {
		for _, addr := range addrs[p.name] {
			start(p.name, p.build, true, "-grpc-addr", addr, "-mongo-uri-file", uri)
		}
	}
	gw := start(gateway.Name, gateway.Build, false, "-grpc-addr", "", "-http-addr", "127.0.0.1:0", "-core-addr", strings.Join(addrs[core.Name], ","))
	r := &apitest.REST{T: t, Base: "https://" + gw.Server.HTTPAddr(), C: adminClient(t, filepath.Join(data, "pki"), gw.Env.TLS.Pool())}

	// The replicas split the shards; the victim works the most clusters.
	leases := store.NewLeases(st, "rsync_leases")
	var holders map[int]string
	apitest.Eventually(t, "the shards split among the three rsync replicas", func() bool {
		list, err := leases.List(context.Background())
		require.NoError(t, err)
		holders = map[int]string{}
		count := map[string]int{}
		for _, l := range list {
			var i int
			if _, err := fmt.Sscanf(l.Name, "shard/%d", &i); err == nil && l.Expires.After(time.Now()) {
				name, _, _ := strings.Cut(l.Holder, "#")
				holders[i] = name
				count[name]++
			}
		}
		return len(holders) == 64 && len(count) == 3 && count["rsync-0"] <= 22 && count["rsync-1"] <= 22 && count["rsync-2"] <= 22
	})
	works := map[string]int{}
	victim := ""
	for _, c := range h.Clusters {
		w := holders[shardOf("edge/"+c.Name)]
		works[w]++
		if victim == "" || works[w] > works[victim] {
			victim = w
		}
	}

	apitest.RegisterHarness(t, r, h)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"scale"}}`)
	lc := "/v2/projects/scale/logical-clouds/lc-k"
	r.Want(201, "POST", "/v2/projects/scale/logical-clouds", `{"metadata": {"name": "lc-k"}, "spec": {"namespace": "scale-ns",
	  "user": {"user-name": "dev", "user-permissions": [
	    {"permission-name": "cm", "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}}}`)
	for _, c := range h.Clusters {
		r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+c.Name+`"}`)
	}
	r.Want(202, "POST", lc+"/apply", "")
	require.NoError(t, kids[victim].Process.Kill())
	_ = kids[victim].Wait()
	killed := time.Now()
	t.Logf("killed %s (working %d of the 3 clusters) right after apply; state then: %s", victim, works[victim], r.Status(lc).State)
	st1 := r.Settle(lc, "Instantiated")
	t.Logf("Instantiated %v after the kill", time.Since(killed).Round(time.Millisecond))
	require.Equal(t, 3, len(st1.Clusters))
	for _, c := range h.Clusters {
		_, err := adminOf(t, c).CoreV1().Namespaces().Get(context.Background(), "scale-ns", metav1.GetOptions{})
		require.NoError(t, err, c.Name)
	}
	r.Want(202, "POST", lc+"/terminate", "")
	r.Settle(lc, "Terminated")
	r.Want(204, "DELETE", lc, "")
}

// shardOf is the resource synchronizer's shard of a cluster (its 64
// shards by default): fnv32a of provider/cluster.
func shardOf(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % 64)
}
