package gateway

import (
	"encoding/json"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// EMCO's status query, GET .../logical-clouds/{lc}/status in EMCO's
// dialect: the parameters EMCO's DCM status handler reads
// (src/dcm/api/logicalCloudHandler.go, statusHandler) and the answer in
// EMCO's shapes (src/orchestrator/pkg/status/types.go), written from the
// project's status (core's GetLogicalCloudStatus). docs/emco.md, "Status".

// emcoStatusParams are the parameters read; watch is the project's own
// (watch=true never gets here: watchParam serves it as the stream). type
// is in EMCO's route and emcoctl sends it (type=rsync), but EMCO's handler
// never reads it: it is taken and has no effect, as in EMCO.
var emcoStatusParams = []string{"instance", "status", "output", "cluster", "resource", "clusters", "resources", "type", "watch"}

// emcoStatusQuery is a status request's parameters.
type emcoStatusQuery struct {
	// instance, if set, is the generation asked for.
	instance string
	// deployed is status=deployed; else ready (EMCO's default).
	deployed bool
	// output is summary, all (the default) or detail.
	output string
	// clusters and resources choose EMCO's other two answers: the
	// clusters, or the resources per cluster.
	clusters, resources bool
	// cluster ("provider+cluster") and resource (names) filter.
	cluster, resource []string
}

// emcoName is EMCO's name check for the cluster and resource filters
// (validation.IsValidName: a Kubernetes label value, not empty).
var emcoName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

// parseEMCOStatus reads EMCO's status parameters from a raw query; a bad
// value, or a parameter EMCO's handler does not read, is 400 naming it.
func parseEMCOStatus(raw string) (*emcoStatusQuery, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, errs.Invalid("query", "is not a URL query: %v", err)
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !contains(emcoStatusParams, k) {
			return nil, errs.Invalid(k, "unknown parameter: the status takes instance, status (ready or deployed), output (summary, all or detail), cluster (provider+cluster), resource, clusters, resources and type (no effect)")
		}
	}
	out := &emcoStatusQuery{output: "all"}
	if v, ok := q["instance"]; ok {
		if out.instance = v[0]; out.instance == "" {
			return nil, errs.Invalid("instance", "is empty: give the instance (the generation) to read")
		}
	}
	if v, ok := q["status"]; ok {
		switch v[0] {
		case "ready":
		case "deployed":
			out.deployed = true
		default:
			return nil, errs.Invalid("status", "%q is not a status: ready or deployed", v[0])
		}
	}
	if v, ok := q["output"]; ok {
		switch v[0] {
		case "summary", "all", "detail":
			out.output = v[0]
		default:
			return nil, errs.Invalid("output", "%q is not an output: summary, all or detail", v[0])
		}
	}
	_, out.clusters = q["clusters"]
	_, out.resources = q["resources"]
	for _, c := range q["cluster"] {
		p, n, ok := strings.Cut(c, "+")
		if !ok || strings.Contains(n, "+") || !emcoName.MatchString(p) || !emcoName.MatchString(n) {
			return nil, errs.Invalid("cluster", "%q is not a cluster: provider+cluster", c)
		}
	}
	out.cluster = q["cluster"]
	for _, r := range q["resource"] {
		if !emcoName.MatchString(r) {
			return nil, errs.Invalid("resource", "%q is not a resource name", r)
		}
	}
	out.resource = q["resource"]
	return out, nil
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// emcoLogicalCloudApp is the one app of a logical cloud's AppContext in
// EMCO (src/dcm/pkg/module/logicalcloud.go filters its status by it).
const emcoLogicalCloudApp = "logical-cloud"

// EMCO's status shapes (src/orchestrator/pkg/status/types.go).

type emcoStates struct {
	StatusContextID string       `json:"statusctxid"`
	Actions         []emcoAction `json:"actions"`
}

// emcoAction is one of EMCO's state actions; the project keeps the last
// only, and no time.
type emcoAction struct {
	State    string `json:"state"`
	Instance string `json:"instance"`
	Revision int64  `json:"revision"`
}

type emcoGVK struct {
	Group   string `json:"Group"`
	Version string `json:"Version"`
	Kind    string `json:"Kind"`
}

type emcoResourceStatus struct {
	GVK            emcoGVK         `json:"GVK"`
	Name           string          `json:"name,omitempty"`
	Detail         json.RawMessage `json:"detail,omitempty"`
	DeployedStatus string          `json:"deployedStatus,omitempty"`
	ReadyStatus    string          `json:"readyStatus,omitempty"`
}

type emcoClusterStatus struct {
	ClusterProvider string               `json:"clusterProvider,omitempty"`
	Cluster         string               `json:"cluster,omitempty"`
	Connectivity    string               `json:"connectivity,omitempty"`
	Resources       []emcoResourceStatus `json:"resources,omitempty"`
}

// emcoStatus is EMCO's LogicalCloudStatus.
type emcoStatus struct {
	Project        string              `json:"project,omitempty"`
	Name           string              `json:"name,omitempty"`
	States         emcoStates          `json:"states"`
	DeployedStatus string              `json:"deployedStatus,omitempty"`
	ReadyStatus    string              `json:"readyStatus,omitempty"`
	DeployedCounts map[string]int      `json:"deployedCounts,omitempty"`
	ReadyCounts    map[string]int      `json:"readyCounts,omitempty"`
	Clusters       []emcoClusterStatus `json:"clusters,omitempty"`
}

type emcoClusterEntry struct {
	ClusterProvider string `json:"clusterProvider"`
	Cluster         string `json:"cluster"`
}

type emcoClustersByApp struct {
	App      string             `json:"app"`
	Clusters []emcoClusterEntry `json:"clusters"`
}

// emcoClustersStatus is EMCO's LogicalCloudClustersStatus (?clusters).
type emcoClustersStatus struct {
	Project       string              `json:"project,omitempty"`
	Name          string              `json:"name,omitempty"`
	ClustersByApp []emcoClustersByApp `json:"clustersByApp"`
}

type emcoResourceEntry struct {
	Name string  `json:"name,omitempty"`
	GVK  emcoGVK `json:"GVK"`
}

type emcoResourcesByApp struct {
	App             string              `json:"app,omitempty"`
	ClusterProvider string              `json:"clusterProvider,omitempty"`
	Cluster         string              `json:"cluster,omitempty"`
	Resources       []emcoResourceEntry `json:"resources"`
}

// emcoResourcesStatus is EMCO's LogicalCloudResourcesStatus (?resources).
type emcoResourcesStatus struct {
	Project        string               `json:"project,omitempty"`
	Name           string               `json:"name,omitempty"`
	ResourcesByApp []emcoResourcesByApp `json:"resourcesByApp"`
}

// emcoDeployed is a resource's state as EMCO's rsync names it
// (resourcestatus.RsyncStatusEnum); stopped, which EMCO lacks, as it is.
var emcoDeployed = map[string]string{"pending": "Pending", "applied": "Applied", "retrying": "Retrying",
	"failed": "Failed", "deleted": "Deleted", "stopped": "Stopped"}

// emcoConnectivity is a cluster's state as EMCO's cluster connectivity
// (appcontext.ClusterReadyStatusEnum).
var emcoConnectivity = map[string]string{"applied": "Available", "deleted": "Available", "retrying": "Retrying",
	"failed": "Unavailable", "orphaned": "Unavailable"}

// emcoStateOf is the logical cloud's state as EMCO's state action names
// it (state.StateEnum).
func emcoStateOf(st *corev1.LogicalCloudStatus) string {
	s := st.GetState()
	switch {
	case s == "Created" || s == "":
		return "Created"
	case strings.HasPrefix(s, "Terminat"):
		if st.GetStopped() {
			return "TerminateStopped"
		}
		return "Terminated"
	case st.GetStopped():
		return "InstantiateStopped"
	}
	return "Instantiated"
}

func gvkOf(r *corev1.ResourceStatus) emcoGVK {
	g, v, ok := strings.Cut(r.GetApiVersion(), "/")
	if !ok {
		g, v = "", r.GetApiVersion()
	}
	return emcoGVK{Group: g, Version: v, Kind: r.GetKind()}
}

// keep reports whether a filter (none: everything) keeps name.
func keep(filter []string, name string) bool {
	return len(filter) == 0 || contains(filter, name)
}

// answer writes st in EMCO's shape for q; an instance other than the
// current one is 404.
func (q *emcoStatusQuery) answer(st *corev1.LogicalCloudStatus) (any, error) {
	created := emcoStateOf(st) == "Created"
	instance := ""
	if !created {
		instance = strconv.FormatInt(st.GetGeneration(), 10)
	}
	if q.instance != "" && q.instance != instance {
		return nil, errs.NotFound("instance %q: DCM keeps the status of the current instance only (%q)", q.instance, instance)
	}
	switch {
	case q.clusters:
		return q.clustersAnswer(st, created), nil
	case q.resources:
		return q.resourcesAnswer(st, created), nil
	}
	out := emcoStatus{Project: st.GetProject(), Name: st.GetLogicalCloud(),
		States: emcoStates{StatusContextID: instance, Actions: []emcoAction{{State: emcoStateOf(st), Instance: instance, Revision: st.GetGeneration()}}}}
	if created {
		// EMCO answers the state alone before the first instantiate.
		return out, nil
	}
	out.DeployedStatus = st.GetState()
	deployed, ready := map[string]int{}, map[string]int{}
	for _, c := range st.GetClusters() {
		if !keep(q.cluster, c.GetClusterProvider()+"+"+c.GetClusterName()) {
			continue
		}
		cs := emcoClusterStatus{ClusterProvider: c.GetClusterProvider(), Cluster: c.GetClusterName(), Connectivity: "Unknown"}
		if v, ok := emcoConnectivity[c.GetState()]; ok {
			cs.Connectivity = v
		}
		for _, r := range c.GetResources() {
			if !keep(q.resource, r.GetName()) {
				continue
			}
			rs := emcoResourceStatus{GVK: gvkOf(r), Name: r.GetName()}
			if q.deployed {
				rs.DeployedStatus = r.GetState()
				if v, ok := emcoDeployed[r.GetState()]; ok {
					rs.DeployedStatus = v
				}
				deployed[rs.DeployedStatus]++
			} else {
				// The project knows a resource is on the cluster as
				// desired (applied), not how its workload runs.
				rs.ReadyStatus = "NotPresent"
				if r.GetState() == "applied" {
					rs.ReadyStatus = "Ready"
				}
				ready[rs.ReadyStatus]++
			}
			if q.output == "detail" {
				b, err := protojson.Marshal(r)
				if err != nil {
					return nil, err
				}
				rs.Detail = b
			}
			cs.Resources = append(cs.Resources, rs)
		}
		if len(cs.Resources) > 0 && q.output != "summary" {
			out.Clusters = append(out.Clusters, cs)
		}
	}
	out.DeployedCounts, out.ReadyCounts = deployed, ready
	switch {
	case ready["NotPresent"] == 0:
		if !q.deployed {
			out.ReadyStatus = "Ready"
		}
	case ready["Ready"] == 0:
		out.ReadyStatus = "NotPresent"
	default:
		out.ReadyStatus = "NotReady"
	}
	return out, nil
}

// clustersAnswer is ?clusters: the logical cloud's clusters.
func (q *emcoStatusQuery) clustersAnswer(st *corev1.LogicalCloudStatus, created bool) emcoClustersStatus {
	out := emcoClustersStatus{Project: st.GetProject(), Name: st.GetLogicalCloud(), ClustersByApp: []emcoClustersByApp{}}
	if created {
		return out
	}
	entry := emcoClustersByApp{App: emcoLogicalCloudApp, Clusters: []emcoClusterEntry{}}
	for _, c := range st.GetClusters() {
		entry.Clusters = append(entry.Clusters, emcoClusterEntry{ClusterProvider: c.GetClusterProvider(), Cluster: c.GetClusterName()})
	}
	out.ClustersByApp = append(out.ClustersByApp, entry)
	return out
}

// resourcesAnswer is ?resources: the resources on each cluster, filtered
// by cluster.
func (q *emcoStatusQuery) resourcesAnswer(st *corev1.LogicalCloudStatus, created bool) emcoResourcesStatus {
	out := emcoResourcesStatus{Project: st.GetProject(), Name: st.GetLogicalCloud(), ResourcesByApp: []emcoResourcesByApp{}}
	if created {
		return out
	}
	for _, c := range st.GetClusters() {
		if !keep(q.cluster, c.GetClusterProvider()+"+"+c.GetClusterName()) {
			continue
		}
		entry := emcoResourcesByApp{App: emcoLogicalCloudApp, ClusterProvider: c.GetClusterProvider(), Cluster: c.GetClusterName(),
			Resources: []emcoResourceEntry{}}
		for _, r := range c.GetResources() {
			entry.Resources = append(entry.Resources, emcoResourceEntry{Name: r.GetName(), GVK: gvkOf(r)})
		}
		out.ResourcesByApp = append(out.ResourcesByApp, entry)
	}
	return out
}
