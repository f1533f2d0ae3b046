package allinone_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
	"github.com/dcm-project/dcm/services/core"
)

// labelChanges is GET .../status's label-changes.
type labelChanges struct {
	LabelChanges []struct {
		Provider string `json:"cluster-provider"`
		Cluster  string `json:"cluster-name"`
		Change   string `json:"change"`
		Reason   string `json:"reason"`
	} `json:"label-changes"`
}

// labelReasons are a logical cloud's label changes as "change cluster:
// reason".
func labelReasons(r *apitest.REST, lc string) []string {
	r.T.Helper()
	var st labelChanges
	require.NoError(r.T, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/status", "")), &st))
	var out []string
	for _, c := range st.LabelChanges {
		out = append(out, c.Change+" "+c.Provider+"/"+c.Cluster+": "+c.Reason)
	}
	return out
}

// putClusterLabels registers cluster c under provider edge with labels
// (POST), or changes the labels of a registered one (PUT, the kubeconfig
// kept).
func putClusterLabels(t *testing.T, r *apitest.REST, c *kubetest.Cluster, register bool, labels ...string) {
	t.Helper()
	spec := map[string]any{"labels": append([]string{}, labels...)}
	if register {
		spec["kubeconfig"] = string(c.Kubeconfig)
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": c.Name}, "spec": spec})
	require.NoError(t, err)
	if register {
		r.Want(201, "POST", "/v2/cluster-providers/edge/clusters", string(body))
		return
	}
	r.Want(200, "PUT", "/v2/cluster-providers/edge/clusters/"+c.Name, string(body))
}

// kindsOn are the kinds of the logical cloud's objects on cluster c.
func kindsOn(t *testing.T, c *kubetest.Cluster, project, lc string) []string {
	var out []string
	for _, o := range leftOn(t, c, project, lc) {
		kind, _, _ := strings.Cut(o, "/")
		if !slices.Contains(out, kind) {
			out = append(out, kind)
		}
	}
	slices.Sort(out)
	return out
}

// TestClustersByLabelFollowTheRegistry (seed 002: "When new K8S cluster
// is added with the label of interest, taking care of creating
// tenant-specific information in that edge"): two logical clouds created
// from seed 002's flat body with cluster-labels "edge-site" are applied to
// cluster-1, the one cluster carrying it. cluster-2 is registered
// afterwards with the label: the one that follows its labels (the
// default) gets its namespace, RBAC and quota there without any update
// call, and a cluster reference; the one created with follow-labels false
// stays where it was until POST .../update, as before. cluster-2 then
// loses the label: the following logical cloud's objects leave it, and its
// status names both changes with their reasons.
func TestClustersByLabelFollowTheRegistry(t *testing.T) {
	h := kubetest.ForTests(t, 2)
	r := apitest.NewREST(t, stacktest.Start(t))
	c1, c2 := h.Clusters[0], h.Clusters[1]
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
	putClusterLabels(t, r, c1, true, "edge-site")
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"follow"}}`)
	flat := func(name, extra string) string {
		return `{"name":"` + name + `","cluster-labels":"edge-site",` + extra + `
		  "resources":{"cpu":"4","memory":"8Gi","pods":"20"},
		  "user":{"name":"user-1","permissions":{"apiGroups":[""],"resources":["configmaps"],"verbs":["get","list"]}}}`
	}
	follows, fixed := "/v2/projects/follow/logical-clouds/lc-follows", "/v2/projects/follow/logical-clouds/lc-fixed"
	r.Want(201, "POST", "/v2/projects/follow/logical-clouds", flat("lc-follows", ""))
	r.Want(201, "POST", "/v2/projects/follow/logical-clouds", flat("lc-fixed", `"follow-labels":false,`))
	require.Contains(t, r.Want(200, "GET", fixed, ""), `"follow-labels":false`)
	for _, lc := range []string{follows, fixed} {
		r.Want(202, "POST", lc+"/apply", "")
		r.Settle(lc, "Instantiated")
	}
	want := []string{"limitranges", "namespaces", "networkpolicies", "resourcequotas", "rolebindings", "roles"}
	on1 := kindsOn(t, c1, "follow", "lc-follows")
	require.Subset(t, on1, want, "the namespace, RBAC and quota on cluster-1")
	require.Empty(t, leftOn(t, c2, "follow", "lc-follows"), "cluster-2 is not registered yet")

	// cluster-2 registered with the label: no update call.
	putClusterLabels(t, r, c2, true, "edge-site")
	apitest.Eventually(t, "lc-follows is on cluster-2", func() bool {
		return slices.Equal(kindsOn(t, c2, "follow", "lc-follows"), on1)
	})
	r.Settle(follows, "Instantiated")
	require.Contains(t, r.Want(200, "GET", follows+"/cluster-references", ""), `"cluster-name":"`+c2.Name+`"`)
	require.Contains(t, labelReasons(r, follows), "joined edge/"+c2.Name+": cluster edge/"+c2.Name+" joined: it carries label edge-site")
	// The registry change reached both logical clouds in the same pass:
	// the one not following stays on cluster-1 only.
	require.Empty(t, leftOn(t, c2, "follow", "lc-fixed"), "follow-labels false: no rollout without an update")
	require.Empty(t, labelReasons(r, fixed))
	require.NotContains(t, r.Want(200, "GET", fixed+"/cluster-references", ""), `"cluster-name":"`+c2.Name+`"`)
	// ... until POST .../update, which selects by label as it always did.
	r.Want(202, "POST", fixed+"/update", "")
	r.Settle(fixed, "Instantiated")
	require.Equal(t, kindsOn(t, c1, "follow", "lc-fixed"), kindsOn(t, c2, "follow", "lc-fixed"))

	// cluster-2 loses the label: lc-follows is released from it.
	putClusterLabels(t, r, c2, false, "other")
	apitest.Eventually(t, "lc-follows has left cluster-2", func() bool { return len(leftOn(t, c2, "follow", "lc-follows")) == 0 })
	r.Settle(follows, "Instantiated")
	require.Equal(t, on1, kindsOn(t, c1, "follow", "lc-follows"), "cluster-1 keeps it")
	require.NotContains(t, r.Want(200, "GET", follows+"/cluster-references", ""), `"cluster-name":"`+c2.Name+`"`)
	require.Equal(t, []string{
		"joined edge/" + c2.Name + ": cluster edge/" + c2.Name + " joined: it carries label edge-site",
		"released edge/" + c2.Name + ": cluster edge/" + c2.Name + " released: it no longer carries label edge-site",
	}, labelReasons(r, follows))

	// cluster-2 labelled again: lc-follows joins it again, and its
	// reference holds it in the registry. With that reference removed by
	// hand, the cluster can be deleted from the registry: lc-follows
	// releases it, for that reason. (What is on a cluster deleted from
	// the registry stays there: DCM no longer reaches it.)
	putClusterLabels(t, r, c2, false, "edge-site")
	apitest.Eventually(t, "lc-follows is on cluster-2 again", func() bool {
		return slices.Equal(kindsOn(t, c2, "follow", "lc-follows"), on1)
	})
	r.Settle(follows, "Instantiated")
	held := r.Want(409, "DELETE", "/v2/cluster-providers/edge/clusters/"+c2.Name, "")
	require.Contains(t, held, "follow/lc-follows")
	r.Want(204, "DELETE", follows+"/cluster-references/"+c2.Name, "")
	r.Want(204, "DELETE", "/v2/cluster-providers/edge/clusters/"+c2.Name, "")
	released := "released edge/" + c2.Name + ": cluster edge/" + c2.Name + " released: it was deleted from the registry"
	apitest.Eventually(t, "lc-follows releases the deleted cluster", func() bool { return slices.Contains(labelReasons(r, follows), released) })
	st := r.Settle(follows, "Instantiated")
	for _, c := range st.Clusters {
		if c.Name == c2.Name {
			require.Equal(t, "orphaned", c.State, "what may remain on the deleted cluster is shown: %+v", st)
		}
	}
	require.Len(t, labelReasons(r, follows), 4)

	// Turned on (or off) by a PUT of spec.follow-labels; refused, naming
	// the field, for a logical cloud with no cluster-labels.
	require.Contains(t, r.Want(200, "PUT", fixed, `{"metadata":{"name":"lc-fixed"},"spec":{"follow-labels":true}}`), `"follow-labels":true`)
	r.Want(201, "POST", "/v2/projects/follow/logical-clouds", `{"metadata":{"name":"lc-spec"}}`)
	bad := r.Want(400, "PUT", "/v2/projects/follow/logical-clouds/lc-spec", `{"metadata":{"name":"lc-spec"},"spec":{"follow-labels":true}}`)
	require.Equal(t, "spec.follow-labels", decodeMap(t, bad)["field"], bad)
	require.Contains(t, r.Want(400, "POST", "/v2/projects/follow/logical-clouds", `{"name":"lc-nolabels","follow-labels":false}`), `"field":"follow-labels"`)

	for _, lc := range []string{follows, fixed} {
		r.Want(202, "POST", lc+"/terminate", "")
		r.Settle(lc, "Terminated")
		r.Want(204, "DELETE", lc, "")
	}
}

// appliedByLabel applies, on the replicated suite, project p1's logical
// cloud lc-1 with cluster-labels "edge", on cluster edge/c1 (a loopback
// address where nothing listens: the rollout retries, which is all a
// transition needs), and returns its path.
func appliedByLabel(t *testing.T, s *replicated) string {
	t.Helper()
	r := s.gw[2]
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
	registerEdge(t, s, "c1")
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", `{"name":"lc-1","cluster-labels":"edge"}`)
	lc := "/v2/projects/p1/logical-clouds/lc-1"
	r.Want(202, "POST", lc+"/apply", "")
	return lc
}

// registerEdge registers cluster name under provider edge with label
// "edge", at a loopback address where nothing listens.
func registerEdge(t *testing.T, s *replicated, name string) {
	t.Helper()
	kc, _ := kubeconfig(t, s.ca, "https://127.0.0.1:1/"+name)
	body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": name}, "spec": map[string]any{"kubeconfig": kc, "labels": []string{"edge"}}})
	require.NoError(t, err)
	s.gw[2].Want(201, "POST", "/v2/cluster-providers/edge/clusters", string(body))
}

// TestClustersByLabelOneCoreReplicaActs: two core replicas on one store
// both hear of a cluster registered with a logical cloud's label; the
// logical cloud's transition lock lets one of them act: the rollout is
// updated once (one generation more) and the join is recorded once.
func TestClustersByLabelOneCoreReplicaActs(t *testing.T) {
	t.Parallel()
	s := startReplicated(t)
	r := s.gw[2]
	lc := appliedByLabel(t, s)
	state, gen := s.state(t, lc)
	require.Equal(t, "Instantiating", state)
	require.Equal(t, int64(1), gen)

	registerEdge(t, s, "c2")
	apitest.Eventually(t, "c2 joins lc-1", func() bool { _, gen := s.state(t, lc); return gen > 1 })
	// The replica that did not act either found the lock taken (and
	// skipped) or, after it, c2 recorded (and had nothing to do).
	apitest.Eventually(t, "the join is recorded", func() bool { return len(labelReasons(r, lc)) > 0 })
	require.Equal(t, []string{"joined edge/c2: cluster edge/c2 joined: it carries label edge"}, labelReasons(r, lc))
	_, gen = s.state(t, lc)
	require.Equal(t, int64(2), gen, "the rollout was updated once")
}

// TestClustersByLabelConvergeAfterCoreRestart: a cluster registered with
// a logical cloud's label while no core replica runs (the registry
// change streamed to nobody) is joined once a core replica starts again:
// core compares every following logical cloud with the registry at start
// (and every DCM_LABELS_INTERVAL), not only at the changes it hears of.
func TestClustersByLabelConvergeAfterCoreRestart(t *testing.T) {
	t.Parallel()
	s := startReplicated(t)
	r := s.gw[2]
	lc := appliedByLabel(t, s)
	_, gen := s.state(t, lc)
	require.Equal(t, int64(1), gen)

	for _, stop := range s.stops[core.Name] {
		stop()
	}
	registerEdge(t, s, "c2") // rsync's: no core is told
	s.restart[core.Name][0]()
	r = s.gw[0] // core replica 0's gateway: replica 1 stays down
	apitest.Eventually(t, "c2 joins lc-1 after the restart", func() bool {
		return slices.Contains(labelReasons(r, lc), "joined edge/c2: cluster edge/c2 joined: it carries label edge")
	})
	require.Contains(t, r.Want(200, "GET", lc+"/cluster-references", ""), `"cluster-name":"c2"`)
	var st struct {
		Generation int64 `json:"generation,string"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/status", "")), &st))
	require.Equal(t, int64(2), st.Generation, "rolled out to c2")
}
