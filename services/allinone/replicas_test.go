package allinone_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/pki"
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

// coreLocks is the collection of core's transition locks, and lockName the
// lease of a logical cloud's (services/core/internal/core/locks.go).
const coreLocks = "core_locks"

func lockName(project, lc string) string { return "lc/" + store.Key(project, lc) }

// replicated is the suite as separate programs, some of them several
// times, on one shared store: two core replicas, two namespace and two
// user replicas, one of each other service. Three gateways front them:
// one reaching core through replica 0 only, one through replica 1 only,
// and one through every replica of each service (address lists).
type replicated struct {
	addrs  map[string][]string // gRPC addresses by program name
	gw     [3]*apitest.REST    // core 0, core 1, every replica
	store  *store.Store        // the shared store, as the first program opened it
	stops  map[string][]func() // a replica's stop, by program name
	client *http.Client
	ca     *pki.CA

	// restart starts a stopped replica again, as it was started.
	restart map[string][]func()
}

func startReplicated(t *testing.T) *replicated {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the suite as separate programs, some replicated: not in -short (make test-unit)")
	}
	data := t.TempDir()
	s := &replicated{addrs: map[string][]string{}, stops: map[string][]func(){}, restart: map[string][]func(){}}
	s.addrs = loopbackAddrs(t, map[string]int{rsync.Name: 1, core.Name: 2, namespace.Name: 2, user.Name: 2, quota.Name: 1,
		servicemesh.Name: 1, cadist.Name: 1, traffic.Name: 1})
	// peers names every replica of each service, and (for the gateway)
	// core's of coreAddrs.
	peers := func(coreAddrs ...string) []string {
		addrs := maps.Clone(s.addrs)
		addrs[core.Name] = coreAddrs
		return gatewayFlags(addrs)
	}
	every := peerFlags(s.addrs)
	ps := newProgramSet(t)
	start := func(name string, build app.Build, needStore bool, args ...string) *app.Program {
		t.Helper()
		p, stop := ps.start(name, build, needStore, slices.Concat([]string{"-data-dir", data}, args)...)
		s.stops[name] = append(s.stops[name], stop)
		return p
	}
	var storeArgs []string
	if uri := os.Getenv("DCM_TEST_MONGO_URI"); uri != "" {
		storeArgs = []string{"-mongo-database", fmt.Sprintf("dcmreplicas_%d", time.Now().UnixNano()),
			"-mongo-uri-file", writeSecret(t, uri)}
	}
	for i, p := range servicePrograms { // rsync first: it runs the embedded store
		for _, addr := range s.addrs[p.name] {
			args := slices.Concat(every, []string{"-grpc-addr", addr}, storeArgs)
			prog := start(p.name, p.build, true, args...)
			s.restart[p.name] = append(s.restart[p.name], func() { start(p.name, p.build, true, args...) })
			if i == 0 {
				s.store = prog.Env.Store
				if storeArgs == nil {
					storeArgs = []string{"-mongo-uri-file", writeSecret(t, prog.Env.Store.ClientURI())}
				}
			}
		}
	}

	dir := filepath.Join(data, "pki")
	var err error
	s.ca, err = pki.LoadCA(filepath.Join(dir, pki.CACertFile), filepath.Join(dir, pki.CAKeyFile))
	require.NoError(t, err)
	for i, coreAddrs := range [][]string{s.addrs[core.Name][:1], s.addrs[core.Name][1:2], s.addrs[core.Name]} {
		gw := start(gateway.Name, gateway.Build, false, slices.Concat(peers(coreAddrs...), []string{"-grpc-addr", "", "-http-addr", "127.0.0.1:0"})...)
		if s.client == nil {
			s.client = adminClient(t, dir, gw.Env.TLS.Pool())
		}
		s.gw[i] = &apitest.REST{T: t, C: s.client, Base: "https://" + gw.Server.HTTPAddr()}
	}
	return s
}

// cloudOnUnreachableCluster makes project p1's logical cloud name on cluster
// edge/c1, where nothing listens: its apply and terminate are accepted and
// their rollouts retry, which is all a lifecycle transition needs.
func (s *replicated) cloudOnUnreachableCluster(t *testing.T, name string) string {
	t.Helper()
	r := s.gw[2]
	if code, _ := apitest.Call(t, s.client, "GET", r.Base+"/v2/projects/p1", ""); code == 404 {
		r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
		r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
		kc, _ := kubeconfig(t, s.ca, "https://127.0.0.1:1/c1")
		body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": "c1"}, "spec": map[string]any{"kubeconfig": kc}})
		require.NoError(t, err)
		r.Want(201, "POST", "/v2/cluster-providers/edge/clusters", string(body))
	}
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"namespace":"ns-%s"}}`, name, name))
	lc := "/v2/projects/p1/logical-clouds/" + name
	r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"c1"}`)
	return lc
}

// state reads a logical cloud's state and its rollout's generation.
func (s *replicated) state(t *testing.T, lc string) (string, int64) {
	t.Helper()
	var st struct {
		State      string `json:"state"`
		Generation int64  `json:"generation,string"`
	}
	require.NoError(t, json.Unmarshal([]byte(s.gw[2].Want(200, "GET", lc+"/status", "")), &st))
	return st.State, st.Generation
}

// answer is one REST answer: its code and, for an error, its reason.
type answer struct {
	code   int
	reason string
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.code, a.reason) }

// race sends method path through gateways 0 and 1 (core replicas 0 and
// 1) at once.
func (s *replicated) race(t *testing.T, method, path string) []answer {
	t.Helper()
	out := make([]answer, 2)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			code, b := apitest.Call(t, s.client, method, s.gw[i].Base+path, "")
			out[i].code = code
			if code != 202 {
				var e struct {
					Reason string `json:"reason"`
				}
				if json.Unmarshal(b, &e) == nil {
					out[i].reason = e.Reason
				}
				if code != 409 {
					t.Errorf("%s %s through core %d: %d %s", method, path, i, code, b)
				}
			}
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b answer) int { return a.code - b.code })
	return out
}

// TestCoreReplicasRaceOnOneLogicalCloud: two core programs on one store,
// each behind its own gateway, are sent the same lifecycle call at the
// same moment, round after round: an apply is one transition (one 202,
// one 409, and the rollout submitted once); a terminate asks for the
// rollout's deletion once. The 409 is CONCURRENT_UPDATE when the calls
// overlapped (the other replica held the logical cloud's lock), or
// WRONG_STATE when one ran after the other.
func TestCoreReplicasRaceOnOneLogicalCloud(t *testing.T) {
	t.Parallel()
	s := startReplicated(t)
	seen := map[string]int{}
	for round := range 8 {
		lc := s.cloudOnUnreachableCluster(t, fmt.Sprintf("race-%d", round))

		got := s.race(t, "POST", lc+"/apply")
		require.Equal(t, 202, got[0].code, "round %d apply: %v", round, got)
		require.Equal(t, 409, got[1].code, "round %d apply: %v", round, got)
		require.Contains(t, []string{"CONCURRENT_UPDATE", "WRONG_STATE"}, got[1].reason, "round %d apply: %v", round, got)
		seen["apply "+got[1].reason]++
		state, gen := s.state(t, lc)
		require.Equal(t, "Instantiating", state, "round %d", round)
		require.Equal(t, int64(1), gen, "round %d: the rollout was submitted once", round)

		got = s.race(t, "POST", lc+"/terminate")
		require.Equal(t, 202, got[0].code, "round %d terminate: %v", round, got)
		// One that ran after the other finds it already being terminated.
		require.Equal(t, 409, got[1].code, "round %d terminate: %v", round, got)
		require.Contains(t, []string{"CONCURRENT_UPDATE", "WRONG_STATE"}, got[1].reason, "round %d terminate: %v", round, got)
		seen["terminate "+got[1].String()]++
		state, gen = s.state(t, lc)
		require.Equal(t, "Terminating", state, "round %d", round)
		require.Equal(t, int64(2), gen, "round %d: the rollout's deletion was asked for once", round)
	}
	t.Logf("the second call of each race (409 reason, or 202): %v", seen)
	leases, err := store.NewLeases(s.store, coreLocks).List(context.Background())
	require.NoError(t, err)
	require.Empty(t, leases, "every transition released its lock")
}

// TestCoreReplicaDiedHoldingTheLock: a core replica that died during a
// transition leaves its lock in the store; until it expires, both live
// replicas refuse the logical cloud's transitions with 409
// CONCURRENT_UPDATE, and then one of them proceeds. (The dead replica is
// played by a lease written as it would have, with a short time to live.)
func TestCoreReplicaDiedHoldingTheLock(t *testing.T) {
	t.Parallel()
	s := startReplicated(t)
	lc := s.cloudOnUnreachableCluster(t, "orphan-lock")
	ctx := context.Background()
	leases := store.NewLeases(s.store, coreLocks)
	dead, err := leases.Acquire(ctx, lockName("p1", "orphan-lock"), "core@gone/1/1", 8*time.Second)
	require.NoError(t, err)

	for i := range 2 {
		code, b := apitest.Call(t, s.client, "POST", s.gw[i].Base+lc+"/apply", "")
		if time.Now().After(dead.Expires) {
			t.Skip("the dead replica's lease expired before the calls were made: the machine is too slow for this check")
		}
		require.Equal(t, 409, code, "through core %d: %s", i, b)
		require.Contains(t, string(b), "CONCURRENT_UPDATE")
		require.Contains(t, string(b), `another transition of logical cloud \"orphan-lock\" is in progress`)
	}
	state, _ := s.state(t, lc)
	require.Equal(t, "Created", state, "nothing was done")

	// Once the lease expired, the next apply proceeds.
	require.Eventually(t, func() bool {
		code, _ := apitest.Call(t, s.client, "POST", s.gw[1].Base+lc+"/apply", "")
		return code == 202
	}, 30*time.Second, 200*time.Millisecond)
	state, _ = s.state(t, lc)
	require.Equal(t, "Instantiating", state)
	all, err := leases.List(ctx)
	require.NoError(t, err)
	require.Empty(t, all, "the lock was taken over, then released")
}

// TestStatelessReplicasBehindTheGateway: with two replicas each of core,
// the namespace and the user service, and every address listed to the
// gateway and to core, stopping one replica of each leaves every call
// succeeding: the gateway's and core's clients go to the other.
func TestStatelessReplicasBehindTheGateway(t *testing.T) {
	t.Parallel()
	s := startReplicated(t)
	r := s.gw[2]
	lc := s.cloudOnUnreachableCluster(t, "lc-a")
	calls := func(round int) {
		t.Helper()
		// gateway -> user -> core (the parent check), user's reads.
		r.Want(201, "POST", lc+"/user-permissions", fmt.Sprintf(`{"permission-name":"perm-%d","apiGroups":[""],"resources":["pods"],"verbs":["get"]}`, round))
		r.Want(200, "GET", lc+"/users", "")
		// gateway -> namespace -> core (parent check and references).
		r.Want(200, "GET", lc+"/namespaces", "")
		// gateway -> core -> namespace, user (a logical cloud's parts).
		name := fmt.Sprintf("lc-b%d", round)
		r.Want(201, "POST", "/v2/projects/p1/logical-clouds", fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"namespace":"ns-%s","user":{"user-name":"u","type":"certificate"}}}`, name, name))
		r.Want(200, "GET", "/v2/projects/p1/logical-clouds/"+name+"/user/u", "")
		r.Want(204, "DELETE", "/v2/projects/p1/logical-clouds/"+name, "")
	}
	for round := range 4 {
		calls(round)
	}
	for _, name := range []string{namespace.Name, user.Name, core.Name} {
		s.stops[name][0]()
	}
	for round := 4; round < 12; round++ {
		calls(round)
	}
}
