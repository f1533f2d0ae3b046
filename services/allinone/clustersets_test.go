package allinone_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// refsOf are the clusters of a logical cloud's cluster references.
func refsOf(t *testing.T, r *apitest.REST, lc string) []string {
	t.Helper()
	var refs struct {
		Refs []struct {
			Cluster string `json:"cluster-name"`
		} `json:"cluster-references"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/cluster-references", "")), &refs))
	var out []string
	for _, x := range refs.Refs {
		out = append(out, x.Cluster)
	}
	return out
}

// setsOf are GET /v2/cluster-sets in words.
func setsOf(t *testing.T, r *apitest.REST) []string {
	t.Helper()
	var sets []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			All      bool     `json:"all-clusters"`
			Provider string   `json:"cluster-provider"`
			Labels   []string `json:"cluster-labels"`
		} `json:"spec"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", "/v2/cluster-sets", "")), &sets))
	var out []string
	for _, s := range sets {
		w := fmt.Sprintf("%s all-clusters=%t", s.Metadata.Name, s.Spec.All)
		if s.Spec.Provider != "" {
			w += " provider=" + s.Spec.Provider
		}
		if len(s.Spec.Labels) > 0 {
			w += " labels=" + strings.Join(s.Spec.Labels, ",")
		}
		out = append(out, w)
	}
	return out
}

// TestClusterSetsDefault: a new installation has one cluster set,
// "default", of every cluster, and every new project is bound to it, so a
// project references any registered cluster as before cluster sets.
func TestClusterSetsDefault(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	registerClusters(t, s, r)
	require.Equal(t, []string{"default all-clusters=true"}, setsOf(t, r))
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	r.Is(200, "GET", "/v2/projects/p1/cluster-set-bindings", "", `[{"cluster-set":"default"}]`)
	r.Is(200, "GET", "/v2/projects/p1/cluster-set-bindings/default", "", `{"cluster-set":"default"}`)
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds", `{"metadata":{"name":"lc-1"},"spec":{"namespace":"ns-1"}}`)
	r.Want(201, "POST", "/v2/projects/p1/logical-clouds/lc-1/cluster-references", `{"cluster-provider":"edge","cluster-name":"c3"}`)
	// Bound: not deleted, not unbound while lc-1 is on c3.
	require.Contains(t, r.Want(409, "DELETE", "/v2/cluster-sets/default", ""), `cluster set \"default\" is bound to projects p1`)
	require.Contains(t, r.Want(409, "DELETE", "/v2/projects/p1/cluster-set-bindings/default", ""), `lc-1 (edge/c3)`)
	// A project's deletion removes its bindings: the set can go then.
	r.Want(204, "DELETE", "/v2/projects/p1/logical-clouds/lc-1", "")
	r.Want(204, "DELETE", "/v2/projects/p1", "")
	r.Want(204, "DELETE", "/v2/cluster-sets/default", "")
	r.Want(404, "GET", "/v2/cluster-sets/default", "")
}

// TestClusterSetsValidated: the cluster set's body is checked field by
// field, a name is unique, and a binding needs its set and project.
func TestClusterSetsValidated(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	for body, field := range map[string]string{
		`{"metadata":{"name":"a"},"spec":{}}`:                                           `"spec"`,
		`{"metadata":{"name":"a"},"spec":{"all-clusters":true,"cluster-labels":["x"]}}`: `"spec.all-clusters"`,
		`{"metadata":{"name":"a"},"spec":{"clusters":[{"cluster-provider":"edge","cluster-name":"c1"},{"cluster-provider":"edge","cluster-name":"c1"}]}}`: `"spec.clusters[1]"`,
		`{"metadata":{"name":"a"},"spec":{"cluster-provider":"Edge!"}}`:                                                                                   `"spec.cluster-provider"`,
		`{"metadata":{"name":"a"},"spec":{"cluster-labels":["bad label"]}}`:                                                                               `"spec.cluster-labels[0]"`,
		`{"metadata":{"name":"A_1"},"spec":{"all-clusters":true}}`:                                                                                        `metadata.name`,
		`{"metadata":{"name":"a"},"spec":{"all-clusters":true},"extra":1}`:                                                                                `extra`,
	} {
		got := r.Want(400, "POST", "/v2/cluster-sets", body)
		require.Contains(t, got, field, body)
	}
	r.Want(201, "POST", "/v2/cluster-sets", `{"metadata":{"name":"a"},"spec":{"cluster-provider":"edge"}}`)
	r.Want(409, "POST", "/v2/cluster-sets", `{"metadata":{"name":"a"},"spec":{"all-clusters":true}}`)
	require.Contains(t, r.Want(400, "PUT", "/v2/cluster-sets/a", `{"metadata":{"name":"b"},"spec":{"all-clusters":true}}`), "metadata.name")
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	r.Want(404, "POST", "/v2/projects/p1/cluster-set-bindings", `{"cluster-set":"nope"}`)
	r.Want(404, "POST", "/v2/projects/nope/cluster-set-bindings", `{"cluster-set":"a"}`)
	r.Want(400, "POST", "/v2/projects/p1/cluster-set-bindings", `{"cluster-set":"a","x":1}`)
	r.Want(201, "POST", "/v2/projects/p1/cluster-set-bindings", `{"cluster-set":"a"}`)
	r.Want(409, "POST", "/v2/projects/p1/cluster-set-bindings", `{"cluster-set":"a"}`)
	r.Is(200, "GET", "/v2/projects/p1/cluster-set-bindings", "", `[{"cluster-set":"a"},{"cluster-set":"default"}]`)
	// Nothing was stored of the refused bodies.
	require.Equal(t, []string{"a all-clusters=false provider=edge", "default all-clusters=true"}, setsOf(t, r))
}

// TestClusterSetsConfineProjects (issue 34, "May this project use that
// cluster?"), on two real clusters: project tenant-a is bound to set-a
// (cluster-1 by name) only, set-b holds cluster-2 (by label zone-b).
// tenant-a cannot reference cluster-2 (403 naming the cluster and the
// rule) in either URL form, cannot select it by label, and its traffic
// intents cannot name it; nothing is stored, and cluster-2 gets nothing.
// A cluster that joins a followed label selection outside the sets is
// refused and reported in the logical cloud's label changes. The set
// cannot be unbound, narrowed or deleted while it is in use (409 naming
// the logical clouds, the clusters, the projects).
func TestClusterSetsConfineProjects(t *testing.T) {
	h := kubetest.ForTests(t, 3) // the package's shared clusters; two used
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	c1, c2 := h.Clusters[0], h.Clusters[1]
	// records counts a collection's records matching filter.
	records := func(coll string, filter bson.D) int64 {
		n, err := s.Env.Store.Database().Collection(coll).CountDocuments(context.Background(), filter)
		require.NoError(t, err)
		return n
	}
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
	putClusterLabels(t, r, c1, true, "edge-site", "zone-a")
	putClusterLabels(t, r, c2, true, "edge-site", "zone-b")
	r.Want(201, "POST", "/v2/cluster-sets", fmt.Sprintf(`{"metadata":{"name":"set-a"},"spec":{"clusters":[{"cluster-provider":"edge","cluster-name":%q}]}}`, c1.Name))
	r.Want(201, "POST", "/v2/cluster-sets", `{"metadata":{"name":"set-b","description":"zone b"},"spec":{"cluster-provider":"edge","cluster-labels":["zone-b"]}}`)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"tenant-a"}}`)
	r.Want(201, "POST", "/v2/projects/tenant-a/cluster-set-bindings", `{"cluster-set":"set-a"}`)
	r.Want(204, "DELETE", "/v2/projects/tenant-a/cluster-set-bindings/default", "")
	r.Is(200, "GET", "/v2/projects/tenant-a/cluster-set-bindings", "", `[{"cluster-set":"set-a"}]`)

	lc := "/v2/projects/tenant-a/logical-clouds/lc-1"
	r.Want(201, "POST", "/v2/projects/tenant-a/logical-clouds", `{"metadata":{"name":"lc-1"},"spec":{"namespace":"ns-1"}}`)
	rule := "in none of project tenant-a's cluster sets (bound: set-a): a project's logical clouds may use only clusters of the cluster sets bound to it"
	got := r.Want(403, "POST", lc+"/cluster-references", fmt.Sprintf(`{"cluster-provider":"edge","cluster-name":%q}`, c2.Name))
	require.Contains(t, got, "cluster edge/"+c2.Name+" is "+rule)
	require.Contains(t, got, `"cluster-name"`)
	got = r.Want(403, "POST", lc+"/cluster-providers/edge/cluster-references", fmt.Sprintf(`{"cluster-name":%q}`, c2.Name))
	require.Contains(t, got, "cluster edge/"+c2.Name+" is "+rule)
	require.Empty(t, refsOf(t, r, lc), "nothing stored")
	require.Zero(t, records("cluster_references", bson.D{}), "no reference record")
	require.Zero(t, records("cluster_holds", bson.D{{Key: "parent", Value: "edge/" + c2.Name}}), "cluster-2 not held in rsync")
	r.Want(201, "POST", lc+"/cluster-references", fmt.Sprintf(`{"cluster-provider":"edge","cluster-name":%q}`, c1.Name))
	require.Equal(t, []string{c1.Name}, refsOf(t, r, lc))

	// By label: edge-site selects both clusters; refused, not created.
	flat := func(name, labels string) string {
		return `{"name":"` + name + `","cluster-labels":"` + labels + `","resources":{"cpu":"4","memory":"8Gi","pods":"20"},
		  "user":{"name":"user-1","permissions":{"apiGroups":[""],"resources":["configmaps"],"verbs":["get","list"]}}}`
	}
	got = r.Want(403, "POST", "/v2/projects/tenant-a/logical-clouds", flat("lc-sites", "edge-site"))
	require.Contains(t, got, "cluster edge/"+c2.Name+" is "+rule)
	require.Contains(t, got, `"cluster-labels"`)
	r.Want(404, "GET", "/v2/projects/tenant-a/logical-clouds/lc-sites", "")
	require.Zero(t, records("logical_clouds", bson.D{{Key: "_id", Value: "tenant-a/lc-sites"}}), "no logical cloud record")
	require.Zero(t, records("cluster_references", bson.D{{Key: "parent", Value: "tenant-a/lc-sites"}}))

	// A followed selection that cluster-2 joins later: refused, reported.
	zone := "/v2/projects/tenant-a/logical-clouds/lc-zone"
	r.Want(201, "POST", "/v2/projects/tenant-a/logical-clouds", flat("lc-zone", "zone-a"))
	r.Want(202, "POST", zone+"/apply", "")
	r.Settle(zone, "Instantiated")
	require.NotEmpty(t, kindsOn(t, c1, "tenant-a", "lc-zone"))
	putClusterLabels(t, r, c2, false, "edge-site", "zone-a", "zone-b")
	refused := "refused edge/" + c2.Name + ": cluster edge/" + c2.Name + " refused: it carries label zone-a, but cluster edge/" + c2.Name +
		" is in none of project tenant-a's cluster sets (bound: set-a)"
	apitest.Eventually(t, "lc-zone reports cluster-2 refused", func() bool { return slices.Contains(labelReasons(r, zone), refused) })
	require.Equal(t, []string{refused}, labelReasons(r, zone), "reported once")
	require.Equal(t, []string{c1.Name}, refsOf(t, r, zone))
	r.Want(202, "POST", zone+"/update", "")
	r.Settle(zone, "Instantiated")
	require.Empty(t, leftOn(t, c2, "tenant-a", "lc-zone"), "nothing on cluster-2, after an update too")

	// A traffic intent naming cluster-2: refused at apply, before anything
	// is rendered.
	base := "/v2/projects/tenant-a/rb/app/v1/traffic-intent-groups"
	r.Want(201, "POST", base, `{"name":"g1","logical-cloud":"lc-1"}`)
	r.Want(201, "POST", base+"/g1/interclusterservice", fmt.Sprintf(`{"name":"ratings","inboundservicename":"ratings","protocol":"HTTP","port":"9080",
		"headless":"false","mutualTLS":"true","serviceMesh":"istio","clusters":[{"cluster-provider":"edge","cluster-name":%q}],
		"clientServices":[{"clientServiceName":"reviews","headless":"false","egressgateway":"false","clusters":[{"cluster-provider":"edge","cluster-name":%q}]}]}`, c1.Name, c2.Name))
	got = r.Want(403, "POST", base+"/g1/apply", "")
	require.Contains(t, got, "interclusterservice/ratings: clientServices[0].clusters[0]: cluster edge/"+c2.Name+" is "+rule)
	require.NotContains(t, r.Want(200, "GET", base+"/g1/status", ""), `"Applied"`)
	require.Zero(t, records("traffic_rollouts", bson.D{}), "no rollout record of the group")

	// In use: not unbound, not narrowed, not deleted.
	got = r.Want(409, "DELETE", "/v2/projects/tenant-a/cluster-set-bindings/set-a", "")
	require.Contains(t, got, "lc-1 (edge/"+c1.Name+"), lc-zone (edge/"+c1.Name+")")
	r.Want(200, "GET", "/v2/projects/tenant-a/cluster-set-bindings/set-a", "")
	got = r.Want(409, "PUT", "/v2/cluster-sets/set-a", `{"metadata":{"name":"set-a"},"spec":{"cluster-labels":["zone-b"]}}`)
	require.Contains(t, got, "project tenant-a: lc-1 (edge/"+c1.Name+"), lc-zone (edge/"+c1.Name+")")
	require.Contains(t, r.Want(200, "GET", "/v2/cluster-sets/set-a", ""), c1.Name, "written back")
	require.Contains(t, r.Want(409, "DELETE", "/v2/cluster-sets/set-a", ""), "is bound to projects tenant-a")

	// Bound to set-b as well, tenant-a references cluster-2.
	r.Want(201, "POST", "/v2/projects/tenant-a/cluster-set-bindings", `{"cluster-set":"set-b"}`)
	r.Want(201, "POST", lc+"/cluster-references", fmt.Sprintf(`{"cluster-provider":"edge","cluster-name":%q}`, c2.Name))
	require.Equal(t, []string{c1.Name, c2.Name}, refsOf(t, r, lc))
	require.Contains(t, r.Want(409, "DELETE", "/v2/projects/tenant-a/cluster-set-bindings/set-b", ""), "lc-1 (edge/"+c2.Name+")")
	r.Want(204, "DELETE", lc+"/cluster-references/"+c2.Name, "")

	// An unbinding racing a reference's creation: the reference is never
	// kept without the binding that admits it. Each round, one of the two
	// wins; both may be refused, neither outlives the other's refusal.
	for i := range 8 {
		var wg sync.WaitGroup
		var unbind, ref int
		wg.Add(2)
		go func() {
			defer wg.Done()
			unbind, _ = apitest.Call(t, r.C, "DELETE", r.Base+"/v2/projects/tenant-a/cluster-set-bindings/set-b", "")
		}()
		go func() {
			defer wg.Done()
			ref, _ = apitest.Call(t, r.C, "POST", r.Base+lc+"/cluster-references", fmt.Sprintf(`{"cluster-provider":"edge","cluster-name":%q}`, c2.Name))
		}()
		wg.Wait()
		bound := strings.Contains(r.Want(200, "GET", "/v2/projects/tenant-a/cluster-set-bindings", ""), "set-b")
		referenced := slices.Contains(refsOf(t, r, lc), c2.Name)
		require.False(t, referenced && !bound, "round %d: unbind %d, reference %d: a reference outlived its binding", i, unbind, ref)
		t.Logf("round %d: unbind %d, reference %d", i, unbind, ref)
		if referenced {
			r.Want(204, "DELETE", lc+"/cluster-references/"+c2.Name, "")
		}
		if !bound {
			r.Want(201, "POST", "/v2/projects/tenant-a/cluster-set-bindings", `{"cluster-set":"set-b"}`)
		}
	}
}
