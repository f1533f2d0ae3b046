package main

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// kind is one DCM resource kind: the RPC that creates one (its URL is the
// contract's, routes_gen.go), how its name is read from a body, and how it
// shows.
type kind struct {
	Name    string   // in documents: LogicalCloud
	Aliases []string // for get/delete: logical-clouds, lc, ...
	// Create is the full method that creates one; its POST binding
	// (collectionRoute) is the collection's URL.
	Create string
	// Parents are the document keys (and get flags) the URL needs: the
	// variables of Path, derived from Create's binding.
	Parents []string
	// Path is the collection's URL, {parent} replaced; derived from
	// Create's binding.
	Path string
	// NameKeys are where a body holds the name, the first found wins.
	NameKeys []string
	// Wrapper is the key of a list answer's array when not a bare array.
	Wrapper string
	// Columns of the table view: header and the JSON path.
	Columns [][2]string
}

// route is one HTTP binding of an RPC (routes_gen.go).
type route struct{ Method, Path string }

// kinds in dependency order: apply goes down the list, delete up it.
var kinds = []*kind{
	{Name: "Project", Aliases: []string{"projects", "project", "proj"}, Create: "/dcm.core.v1.CoreService/CreateProject",
		NameKeys: []string{"metadata.name"}, Columns: [][2]string{{"DESCRIPTION", "metadata.description"}}},
	{Name: "ClusterProvider", Aliases: []string{"cluster-providers", "cluster-provider", "clusterprovider", "providers"},
		Create: "/dcm.rsync.v1.RsyncService/CreateClusterProvider", NameKeys: []string{"metadata.name"},
		Columns: [][2]string{{"DESCRIPTION", "metadata.description"}}},
	{Name: "Cluster", Aliases: []string{"clusters", "cluster"},
		Create: "/dcm.rsync.v1.RsyncService/CreateCluster", NameKeys: []string{"metadata.name"},
		Columns: [][2]string{{"SERVER", "status.server"}, {"LABELS", "spec.labels"}, {"STATE", "status.state"}, {"LAST-SEEN", "status.last-seen"}}},
	{Name: "ClusterSet", Aliases: []string{"cluster-sets", "cluster-set", "clusterset"},
		Create: "/dcm.core.v1.CoreService/CreateClusterSet", NameKeys: []string{"metadata.name"},
		Columns: [][2]string{{"ALL-CLUSTERS", "spec.all-clusters"}, {"CLUSTERS", "spec.clusters"}, {"LABELS", "spec.cluster-labels"}, {"PROVIDER", "spec.cluster-provider"}}},
	{Name: "LogicalCloud", Aliases: []string{"logical-clouds", "logical-cloud", "logicalcloud", "lc"},
		Create:   "/dcm.core.v1.LogicalCloudService/CreateLogicalCloud",
		NameKeys: []string{"metadata.name", "name"},
		Columns:  [][2]string{{"NAMESPACE", "spec.namespace"}, {"LEVEL", "spec.level"}, {"USER", "spec.user.user-name"}, {"STATE", "lifecycle.state"}}},
	{Name: "ClusterReference", Aliases: []string{"cluster-references", "cluster-reference", "clusterreference", "refs"},
		Create:   "/dcm.core.v1.LogicalCloudService/CreateClusterReference",
		NameKeys: []string{"metadata.name", "cluster-name"}, Wrapper: "cluster-references",
		Columns: [][2]string{{"PROVIDER", "cluster-provider"}, {"CLUSTER", "cluster-name"}, {"LOADBALANCER-IP", "loadbalancer-ip"}}},
	{Name: "UserPermission", Aliases: []string{"user-permissions", "user-permission", "userpermission", "permissions"},
		Create:   "/dcm.user.v1.UserService/CreateUserPermission",
		NameKeys: []string{"permission-name", "metadata.name"},
		Columns:  [][2]string{{"NAMESPACE", "namespace"}, {"RESOURCES", "resources"}, {"VERBS", "verbs"}}},
	{Name: "ClusterQuota", Aliases: []string{"cluster-quotas", "cluster-quota", "clusterquota", "quotas"},
		Create:   "/dcm.quota.v1.QuotaService/CreateQuota",
		NameKeys: []string{"metadata.name"}, Columns: [][2]string{{"SPEC", "spec"}}},
	{Name: "KVPair", Aliases: []string{"kv-pairs", "kv-pair", "kvpair", "kv"},
		Create:   "/dcm.core.v1.LogicalCloudService/CreateKvPair",
		NameKeys: []string{"metadata.name"}, Columns: [][2]string{{"KV", "spec.kv"}}},
	{Name: "TrafficIntentGroup", Aliases: []string{"traffic-intent-groups", "traffic-intent-group", "trafficintentgroup", "tig"},
		Create:   "/dcm.traffic.v1.TrafficService/CreateTrafficIntentGroup",
		NameKeys: []string{"name", "metadata.name"}, Columns: [][2]string{{"LOGICAL-CLOUD", "logical-cloud"}, {"DESCRIPTION", "description"}}},
}

// intentKinds are a traffic intent group's five intents: the kind, the
// RPC that creates one, a short alias. The collection's last segment
// (interclusterservice, ...) is an alias too.
var intentKinds = [][3]string{
	{"InterClusterIntent", "/dcm.traffic.v1.TrafficService/CreateInterclusterIntent", "intercluster"},
	{"IntraClusterIntent", "/dcm.traffic.v1.TrafficService/CreateIntraclusterIntent", "intracluster"},
	{"ExternalOutboundIntent", "/dcm.traffic.v1.TrafficService/CreateExternalOutboundIntent", "external-outbound"},
	{"ExternalInboundIntent", "/dcm.traffic.v1.TrafficService/CreateExternalInboundIntent", "external-inbound"},
	{"DNSProviderIntent", "/dcm.traffic.v1.TrafficService/CreateDnsProviderIntent", "dns-providers"},
}

func init() {
	for _, k := range kinds {
		mustRoute(k)
	}
	for _, ik := range intentKinds {
		k := &kind{Name: ik[0], Create: ik[1],
			NameKeys: []string{"name", "metadata.name"}, Columns: [][2]string{{"DESCRIPTION", "description"}}}
		mustRoute(k)
		k.Aliases = []string{k.Path[strings.LastIndex(k.Path, "/")+1:], ik[2], strings.ToLower(ik[0])}
		kinds = append(kinds, k)
	}
}

// mustRoute sets k's Path and Parents from its Create binding. The table
// is generated with the contracts, and TestKindsRoutes checks every kind's:
// a kind without one is a mistake in this file.
func mustRoute(k *kind) {
	var err error
	if k.Path, k.Parents, err = collectionRoute(k.Create); err != nil {
		panic(fmt.Sprintf("dcmctl: kind %s: %v", k.Name, err))
	}
}

// collectionRoute is the collection URL of the RPC that creates a kind:
// its first POST binding, with each {field} variable named as documents
// and get flags name the parent ({logical_cloud} is {logicalCloud}), and
// those names in order.
func collectionRoute(rpc string) (string, []string, error) {
	for _, r := range routes[rpc] {
		if r.Method != "POST" {
			continue
		}
		var parents []string
		segs := strings.Split(r.Path, "/")
		for i, s := range segs {
			if !strings.HasPrefix(s, "{") {
				continue
			}
			v := strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")
			if v == "" || strings.ContainsAny(v, "=*{}") {
				return "", nil, fmt.Errorf("%s: %s: variable %s is not a plain {field}", rpc, r.Path, s)
			}
			v = lowerCamel(v)
			parents = append(parents, v)
			segs[i] = "{" + v + "}"
		}
		return strings.Join(segs, "/"), parents, nil
	}
	return "", nil, fmt.Errorf("%s has no POST binding (routes_gen.go: make generate)", rpc)
}

// lowerCamel is a proto field name as JSON spells it: logical_cloud is
// logicalCloud.
func lowerCamel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// kindNamed finds a kind by its name or an alias (case-insensitive).
func kindNamed(s string) (*kind, int, error) {
	l := strings.ToLower(s)
	for i, k := range kinds {
		if strings.ToLower(k.Name) == l {
			return k, i, nil
		}
		for _, a := range k.Aliases {
			if a == l {
				return k, i, nil
			}
		}
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
	}
	return nil, 0, fmt.Errorf("unknown kind %q (kinds: %s)", s, strings.Join(names, ", "))
}

// collection is k's collection URL for parents p.
func (k *kind) collection(p map[string]string) (string, error) {
	path := k.Path
	for _, name := range k.Parents {
		v := p[name]
		if v == "" {
			return "", fmt.Errorf("%s needs %q", k.Name, name)
		}
		path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(v))
	}
	return path, nil
}

// nameOf reads an object's name from its body.
func (k *kind) nameOf(body map[string]any) string {
	for _, key := range k.NameKeys {
		if s, ok := lookup(body, key).(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// lookup reads a dotted path of nested objects ("metadata.name").
func lookup(v any, path string) any {
	for _, part := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// The RPCs behind dcmctl's other commands; their URLs are the contracts'
// (routeURL).
const (
	rpcListProjects = "/dcm.core.v1.CoreService/ListProjects"
	rpcLCStatus     = "/dcm.core.v1.LogicalCloudService/GetLogicalCloudStatus"
	rpcKubeconfig   = "/dcm.core.v1.LogicalCloudService/GetKubeconfig"
	rpcCreateToken  = "/dcm.auth.v1.AuthService/CreateToken"
	rpcListTokens   = "/dcm.auth.v1.AuthService/ListTokens"
	rpcDeleteToken  = "/dcm.auth.v1.AuthService/DeleteToken"
)

// lcVerbs are logical-cloud's verbs and the RPC each calls (POST).
var lcVerbs = map[string]string{
	"apply":     "/dcm.core.v1.LogicalCloudService/ApplyLogicalCloud",
	"update":    "/dcm.core.v1.LogicalCloudService/UpdateLogicalCloudResources",
	"stop":      "/dcm.core.v1.LogicalCloudService/StopLogicalCloud",
	"resume":    "/dcm.core.v1.LogicalCloudService/ResumeLogicalCloud",
	"rollback":  "/dcm.core.v1.LogicalCloudService/RollbackLogicalCloud",
	"terminate": "/dcm.core.v1.LogicalCloudService/TerminateLogicalCloud",
}

// routeURL is the URL of rpc's first binding for method whose variables
// are exactly vals' keys (proto field names: logical_cloud), each value
// path-escaped into its segment.
func routeURL(method, rpc string, vals map[string]string) (string, error) {
	for _, r := range routes[rpc] {
		if r.Method != method {
			continue
		}
		segs := strings.Split(r.Path, "/")
		used := 0
		ok := true
		for i, s := range segs {
			if !strings.HasPrefix(s, "{") {
				continue
			}
			v, given := vals[strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}")]
			if !given {
				ok = false
				break
			}
			segs[i] = url.PathEscape(v)
			used++
		}
		if ok && used == len(vals) {
			return strings.Join(segs, "/"), nil
		}
	}
	return "", fmt.Errorf("%s has no %s binding with the variables %v (routes_gen.go: make generate)", rpc, method, keysOf(vals))
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
