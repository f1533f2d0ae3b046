package main

import (
	"fmt"
	"net/url"
	"strings"
)

// kind is one DCM resource kind: where its collection is, which parent
// names its URL needs, how its name is read from a body, and how it shows.
type kind struct {
	Name    string   // in documents: LogicalCloud
	Aliases []string // for get/delete: logical-clouds, lc, ...
	// Parents are the document keys (and get flags) the URL needs.
	Parents []string
	// Path is the collection's URL, {parent} replaced.
	Path string
	// NameKeys are where a body holds the name, the first found wins.
	NameKeys []string
	// Wrapper is the key of a list answer's array when not a bare array.
	Wrapper string
	// Columns of the table view: header and the JSON path.
	Columns [][2]string
}

// kinds in dependency order: apply goes down the list, delete up it.
var kinds = []*kind{
	{Name: "Project", Aliases: []string{"projects", "project", "proj"}, Path: "/v2/projects",
		NameKeys: []string{"metadata.name"}, Columns: [][2]string{{"DESCRIPTION", "metadata.description"}}},
	{Name: "ClusterProvider", Aliases: []string{"cluster-providers", "cluster-provider", "clusterprovider", "providers"},
		Path: "/v2/cluster-providers", NameKeys: []string{"metadata.name"},
		Columns: [][2]string{{"DESCRIPTION", "metadata.description"}}},
	{Name: "Cluster", Aliases: []string{"clusters", "cluster"}, Parents: []string{"provider"},
		Path: "/v2/cluster-providers/{provider}/clusters", NameKeys: []string{"metadata.name"},
		Columns: [][2]string{{"SERVER", "status.server"}, {"LABELS", "spec.labels"}}},
	{Name: "LogicalCloud", Aliases: []string{"logical-clouds", "logical-cloud", "logicalcloud", "lc"},
		Parents: []string{"project"}, Path: "/v2/projects/{project}/logical-clouds",
		NameKeys: []string{"metadata.name", "name"},
		Columns:  [][2]string{{"NAMESPACE", "spec.namespace"}, {"LEVEL", "spec.level"}, {"USER", "spec.user.user-name"}, {"STATE", "lifecycle.state"}}},
	{Name: "ClusterReference", Aliases: []string{"cluster-references", "cluster-reference", "clusterreference", "refs"},
		Parents: []string{"project", "logicalCloud"}, Path: "/v2/projects/{project}/logical-clouds/{logicalCloud}/cluster-references",
		NameKeys: []string{"metadata.name", "cluster-name"}, Wrapper: "cluster-references",
		Columns: [][2]string{{"PROVIDER", "cluster-provider"}, {"CLUSTER", "cluster-name"}, {"LOADBALANCER-IP", "loadbalancer-ip"}}},
	{Name: "UserPermission", Aliases: []string{"user-permissions", "user-permission", "userpermission", "permissions"},
		Parents: []string{"project", "logicalCloud"}, Path: "/v2/projects/{project}/logical-clouds/{logicalCloud}/user-permissions",
		NameKeys: []string{"permission-name", "metadata.name"},
		Columns:  [][2]string{{"NAMESPACE", "namespace"}, {"RESOURCES", "resources"}, {"VERBS", "verbs"}}},
	{Name: "ClusterQuota", Aliases: []string{"cluster-quotas", "cluster-quota", "clusterquota", "quotas"},
		Parents: []string{"project", "logicalCloud"}, Path: "/v2/projects/{project}/logical-clouds/{logicalCloud}/cluster-quotas",
		NameKeys: []string{"metadata.name"}, Columns: [][2]string{{"SPEC", "spec"}}},
	{Name: "KVPair", Aliases: []string{"kv-pairs", "kv-pair", "kvpair", "kv"},
		Parents: []string{"project", "logicalCloud"}, Path: "/v2/projects/{project}/logical-clouds/{logicalCloud}/kv-pairs",
		NameKeys: []string{"metadata.name"}, Columns: [][2]string{{"KV", "spec.kv"}}},
	{Name: "TrafficIntentGroup", Aliases: []string{"traffic-intent-groups", "traffic-intent-group", "trafficintentgroup", "tig"},
		Parents:  []string{"project", "compositeApp", "version"},
		Path:     "/v2/projects/{project}/rb/{compositeApp}/{version}/traffic-intent-groups",
		NameKeys: []string{"name", "metadata.name"}, Columns: [][2]string{{"LOGICAL-CLOUD", "logical-cloud"}, {"DESCRIPTION", "description"}}},
}

// intentKinds are a traffic intent group's five intents.
var intentKinds = [][3]string{
	{"InterClusterIntent", "interclusterservice", "intercluster"},
	{"IntraClusterIntent", "intraclusterservice", "intracluster"},
	{"ExternalOutboundIntent", "externaloutboundaccess", "external-outbound"},
	{"ExternalInboundIntent", "externalinboundaccess", "external-inbound"},
	{"DNSProviderIntent", "dnsproviders", "dns-providers"},
}

func init() {
	for _, ik := range intentKinds {
		kinds = append(kinds, &kind{Name: ik[0], Aliases: []string{ik[1], ik[2], strings.ToLower(ik[0])},
			Parents:  []string{"project", "compositeApp", "version", "group"},
			Path:     "/v2/projects/{project}/rb/{compositeApp}/{version}/traffic-intent-groups/{group}/" + ik[1],
			NameKeys: []string{"name", "metadata.name"}, Columns: [][2]string{{"DESCRIPTION", "description"}}})
	}
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
