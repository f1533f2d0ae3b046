package kube

import "slices"

// EMCO's standard logical cloud example grants apiGroups, resources and
// verbs ["*"] in the logical cloud's namespace: everything in it. As a
// Role that would include the tenant's ResourceQuotas, LimitRange and
// NetworkPolicies, and RBAC's escalate and bind. Below level privileged
// DCM takes it as "namespace admin" instead: Kubernetes' own answer, the
// built-in admin ClusterRole, less what DCM keeps in the namespace
// (docs/security.md, "Namespace admin").

// IsNamespaceAdmin reports whether a permission is EMCO's "everything"
// (apiGroups, resources and verbs each exactly ["*"]).
func IsNamespaceAdmin(apiGroups, resources, verbs []string) bool {
	all := []string{"*"}
	return slices.Equal(apiGroups, all) && slices.Equal(resources, all) && slices.Equal(verbs, all)
}

var (
	readVerbs   = []string{"get", "list", "watch"}
	changeVerbs = []string{"create", "delete", "deletecollection", "patch", "update"}
	allVerbs    = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
)

// A nsRule is one rule of NamespaceAdminRules.
type nsRule struct {
	group     string
	resources []string
	verbs     []string
}

// namespaceAdmin is the rules of Kubernetes' admin ClusterRole as the
// kube-apiserver of the test clusters (v1.33) bootstraps them (the union of
// system:aggregate-to-admin, -edit and -view, which admin aggregates),
// less:
//   - writes to networkpolicies (networking.k8s.io and extensions): DCM's
//     dcm-ingress and dcm-egress isolate the namespace, and policies add up;
//   - impersonate on serviceaccounts and create on serviceaccounts/token:
//     another user of the logical cloud may be a ServiceAccount holding
//     grants outside the namespace.
//
// ResourceQuotas, LimitRanges and the namespace are read-only in admin
// already; RBAC roles and bindings are writable, and the API server's
// escalation check bounds what a tenant grants by what it holds.
// TestNamespaceAdminIsAdminLessDCMs (services/allinone) compares this with
// a cluster's roles.
var namespaceAdmin = []nsRule{
	{"", []string{"bindings", "configmaps", "endpoints", "events", "limitranges", "namespaces", "namespaces/status",
		"persistentvolumeclaims", "persistentvolumeclaims/status", "pods", "pods/attach", "pods/exec", "pods/log",
		"pods/portforward", "pods/proxy", "pods/status", "replicationcontrollers", "replicationcontrollers/scale",
		"replicationcontrollers/status", "resourcequotas", "resourcequotas/status", "secrets", "serviceaccounts",
		"services", "services/proxy", "services/status"}, readVerbs},
	{"", []string{"configmaps", "events", "persistentvolumeclaims", "pods", "pods/attach", "pods/exec",
		"pods/portforward", "pods/proxy", "replicationcontrollers", "replicationcontrollers/scale", "secrets",
		"serviceaccounts", "services", "services/proxy"}, changeVerbs},
	{"", []string{"pods/eviction"}, []string{"create"}},
	{"apps", []string{"controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
		"deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets",
		"statefulsets/scale", "statefulsets/status"}, readVerbs},
	{"apps", []string{"daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets",
		"replicasets/scale", "statefulsets", "statefulsets/scale"}, changeVerbs},
	{"autoscaling", []string{"horizontalpodautoscalers", "horizontalpodautoscalers/status"}, readVerbs},
	{"autoscaling", []string{"horizontalpodautoscalers"}, changeVerbs},
	{"batch", []string{"cronjobs", "cronjobs/status", "jobs", "jobs/status"}, readVerbs},
	{"batch", []string{"cronjobs", "jobs"}, changeVerbs},
	{"discovery.k8s.io", []string{"endpointslices"}, readVerbs},
	{"extensions", []string{"daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status",
		"ingresses", "ingresses/status", "networkpolicies", "replicasets", "replicasets/scale", "replicasets/status",
		"replicationcontrollers/scale"}, readVerbs},
	{"extensions", []string{"daemonsets", "deployments", "deployments/rollback", "deployments/scale", "ingresses",
		"replicasets", "replicasets/scale", "replicationcontrollers/scale"}, changeVerbs},
	{"policy", []string{"poddisruptionbudgets", "poddisruptionbudgets/status"}, readVerbs},
	{"policy", []string{"poddisruptionbudgets"}, changeVerbs},
	{networkingAPIGroup, []string{"ingresses", "ingresses/status", "networkpolicies"}, readVerbs},
	{networkingAPIGroup, []string{"ingresses"}, changeVerbs},
	{"coordination.k8s.io", []string{"leases"}, allVerbs},
	{"authorization.k8s.io", []string{"localsubjectaccessreviews"}, []string{"create"}},
	{rbacAPIGroup, []string{"rolebindings", "roles"}, allVerbs},
}

// NamespaceAdminRules are the rules of the Role DCM renders for a
// namespace-admin permission (IsNamespaceAdmin), as a Role's "rules".
func NamespaceAdminRules() []any {
	out := make([]any, 0, len(namespaceAdmin))
	for _, r := range namespaceAdmin {
		out = append(out, map[string]any{"apiGroups": []string{r.group}, "resources": r.resources, "verbs": r.verbs})
	}
	return out
}
