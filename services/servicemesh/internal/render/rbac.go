package render

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dcm-project/dcm/platform/kube"
)

// A logical cloud's control plane gets only what it needs on a cluster it
// shares with other tenants (docs/mesh.md, "A mesh on a shared cluster"):
//
//   - the charts' values turn off what DCM does not use: the Gateway API
//     (its deployment controller made Deployments, Services and
//     ServiceAccounts in any namespace, its GatewayClass controller wrote
//     cluster-scoped GatewayClasses), the Kubernetes Ingress controller,
//     the credentials controller (it read every Secret of the cluster),
//     its copy for remote clusters, and the gateways'
//     Roles (they let each gateway read every Secret of the istio
//     namespace, the CA key included; DCM's gateways take no credentialName
//     Secret);
//   - confine rewrites the charts' ClusterRoles to the rules below: reads
//     that istiod's informers make cluster-wide, the review APIs, and
//     webhook writes by name (resourceNames: the webhook configurations
//     rendered with them). Every write to a namespaced object is a Role in
//     the logical cloud's namespaces (its workload namespace and its istio
//     namespace), bound to istiod's ServiceAccount;
//   - a ClusterRole from the charts that DCM does not know is an error
//     (a chart update must be looked at, not applied).

// Prefixes of the ClusterRoles the charts render (release namespace and
// revision follow).
const (
	istiodClusterRolePrefix = "istiod-clusterrole-"
	readerClusterRolePrefix = "istio-reader-clusterrole-"
)

// IstiodRoleName is the Role (and RoleBinding) DCM renders for istiod in
// each of the logical cloud's namespaces.
func IstiodRoleName(revision string) string { return "dcm-istiod-" + revision }

// istiodServiceAccount is istiod's ServiceAccount (the chart's name).
func istiodServiceAccount(revision string) string { return "istiod-" + revision }

// Istio's API groups (the chart's list).
var istioGroups = []any{"config.istio.io", "security.istio.io", "networking.istio.io", "authentication.istio.io",
	"rbac.istio.io", "telemetry.istio.io", "extensions.istio.io"}

var readVerbs = []any{"get", "list", "watch"}

func ruleOf(groups []any, resources []any, verbs []any, names ...string) map[string]any {
	r := map[string]any{"apiGroups": groups, "resources": resources, "verbs": verbs}
	if len(names) > 0 {
		ns := make([]any, len(names))
		for i, n := range names {
			ns[i] = n
		}
		r["resourceNames"] = ns
	}
	return r
}

// istiodClusterRules are istiod's cluster-wide rules. mutating and
// validating are the names of the logical cloud's own webhook
// configurations on the cluster.
func istiodClusterRules(mutating, validating []string) []any {
	core := []any{""}
	rules := []any{
		// Its informers list and watch these cluster-wide and filter by
		// the discovery selectors in process (Kubernetes RBAC cannot grant
		// a list by the namespaces' labels).
		ruleOf(istioGroups, []any{"*"}, readVerbs),
		ruleOf(core, []any{"pods", "nodes", "services", "namespaces", "endpoints"}, readVerbs),
		ruleOf([]any{"discovery.k8s.io"}, []any{"endpointslices"}, readVerbs),
		// Its config store watches Ingresses whatever ingressControllerMode
		// says (crdclient, pilot/pkg/bootstrap/configcontroller.go); the
		// Ingress controller and its status writes are off.
		ruleOf([]any{"networking.k8s.io"}, []any{"ingresses"}, readVerbs),
		// Which CRDs are installed (its delayed informers wait for them).
		ruleOf([]any{"apiextensions.k8s.io"}, []any{"customresourcedefinitions"}, readVerbs),
		// Gateway API objects are read (a Gateway informer per cluster and
		// the ambient index's GatewayClass informer start once the CRDs
		// exist); never written: the Gateway API controllers are off.
		ruleOf([]any{"gateway.networking.k8s.io", "gateway.networking.x-k8s.io"}, []any{"*"}, readVerbs),
		// The namespace controller lists and watches its two ConfigMaps
		// in every namespace by name (a metadata.name field selector,
		// which resourceNames can grant); it writes them in the logical
		// cloud's namespaces only (Roles below). No Secret: the
		// credentials controller, the one cluster-wide Secret informer,
		// is off (PILOT_ENABLE_XDS_IDENTITY_CHECK=false, see tuneReleases).
		ruleOf(core, []any{"configmaps"}, []any{"list", "watch"}, CACertConfigMaps...),
		// Workload tokens (the CA) and gateway SDS authorization.
		ruleOf([]any{"authentication.k8s.io"}, []any{"tokenreviews"}, []any{"create"}),
		ruleOf([]any{"authorization.k8s.io"}, []any{"subjectaccessreviews"}, []any{"create"}),
		// Its webhooks' caBundle: the patcher and the validation
		// controller watch by the istio.io/rev label and update by name.
		ruleOf([]any{"admissionregistration.k8s.io"}, []any{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"},
			[]any{"list", "watch"}),
	}
	if len(mutating) > 0 {
		rules = append(rules, ruleOf([]any{"admissionregistration.k8s.io"}, []any{"mutatingwebhookconfigurations"},
			[]any{"get", "update", "patch"}, mutating...))
	}
	if len(validating) > 0 {
		rules = append(rules, ruleOf([]any{"admissionregistration.k8s.io"}, []any{"validatingwebhookconfigurations"},
			[]any{"get", "update"}, validating...))
	}
	return rules
}

// readerClusterRules are istio-reader-service-account's: what another
// cluster's istiod reads of this one for multi-primary endpoint discovery
// (with the remote secret core gives it, docs/mesh.md "Across clusters").
// No Secret, no ConfigMap (the remote credentials controller is off; the
// mesh config is read in the istio namespace only, readerNamespaceRules),
// no write.
func readerClusterRules() []any {
	core := []any{""}
	return []any{
		ruleOf(istioGroups, []any{"*"}, readVerbs),
		ruleOf(core, []any{"endpoints", "pods", "services", "nodes", "replicationcontrollers", "namespaces"}, readVerbs),
		ruleOf([]any{"discovery.k8s.io"}, []any{"endpointslices"}, readVerbs),
		ruleOf([]any{"apiextensions.k8s.io"}, []any{"customresourcedefinitions"}, readVerbs),
		ruleOf([]any{"networking.x-k8s.io", "gateway.networking.k8s.io"}, []any{"gateways"}, readVerbs),
		ruleOf([]any{"apps"}, []any{"replicasets"}, readVerbs),
		ruleOf([]any{"authentication.k8s.io"}, []any{"tokenreviews"}, []any{"create"}),
		ruleOf([]any{"authorization.k8s.io"}, []any{"subjectaccessreviews"}, []any{"create"}),
	}
}

// ReaderRoleName is the Role of istio-reader-service-account in the istio
// namespace of revision.
func ReaderRoleName(revision string) string { return "dcm-istio-reader-" + revision }

// readerNamespaceRules are the reader's rights in the istio namespace:
// another cluster's istiod watches this cluster's mesh config there
// (ConfigMap istio-<revision>, "Created mesh watcher for remote cluster").
func readerNamespaceRules() []any {
	return []any{ruleOf([]any{""}, []any{"configmaps"}, readVerbs)}
}

// CACertConfigMaps are the ConfigMaps istiod's namespace controller
// writes in every namespace it discovers: the CA's roots and its
// revocation list.
var CACertConfigMaps = []string{"istio-ca-crl", "istio-ca-root-cert"}

// istiodNamespaceRules are istiod's rights in one of the logical cloud's
// namespaces: the writes it makes there (the chart granted them
// cluster-wide), and in its own namespace the reads of its ConfigMaps
// (mesh config, injector templates; the chart's own Role there holds its
// Secrets and Leases).
func istiodNamespaceRules(own bool) []any {
	core := []any{""}
	status := []any{"get", "update", "patch"}
	cm := []any{"get", "create", "update"}
	if own {
		cm = append(cm, "list", "watch")
	}
	return []any{
		// The CA's istio-ca-root-cert in every discovered namespace.
		ruleOf(core, []any{"configmaps"}, cm),
		// WorkloadGroup auto-registration and health of WorkloadEntries.
		ruleOf([]any{"networking.istio.io"}, []any{"workloadentries"}, []any{"get", "list", "watch", "create", "update", "patch", "delete"}),
		// Status writers: ServiceEntry address allocation
		// (PILOT_ENABLE_IP_AUTOALLOCATE), WorkloadEntry health,
		// AuthorizationPolicy and Service conditions.
		ruleOf([]any{"networking.istio.io"}, []any{"workloadentries/status", "serviceentries/status"}, status),
		ruleOf([]any{"security.istio.io"}, []any{"authorizationpolicies/status"}, status),
		ruleOf(core, []any{"services/status"}, status),
	}
}

// tuneReleases sets the charts' values that turn off what a logical cloud
// does not use and cap its autoscalers and resources (quota.go).
func tuneReleases(rels []release) []release {
	for _, r := range rels {
		switch r.dir {
		case discoveryChart:
			env := subMap(r.vals, "env")
			for k, v := range map[string]any{
				"PILOT_ENABLE_GATEWAY_API":                         "false",
				"PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER":   "false",
				"PILOT_ENABLE_GATEWAY_API_GATEWAYCLASS_CONTROLLER": "false",
				"PILOT_ENABLE_REMOTE_CREDENTIALS_CONTROLLER":       "false",
				// The credentials controller lists every Secret of the
				// cluster (an informer Kubernetes RBAC cannot narrow to
				// the logical cloud's namespaces); it serves gateways'
				// credentialName Secrets, which DCM does not use, and the
				// xDS identity check, which plaintext xDS (15010, open to
				// the logical cloud's own namespaces only) does not make
				// either. docs/mesh.md, "A mesh on a shared cluster".
				"PILOT_ENABLE_XDS_IDENTITY_CHECK": "false",
			} {
				env[k] = v
			}
			subMap(r.vals, "meshConfig")["ingressControllerMode"] = "OFF"
			r.vals["autoscaleEnabled"] = true
			r.vals["autoscaleMin"] = 1
			r.vals["autoscaleMax"] = IstiodMaxReplicas
			r.vals["resources"] = map[string]any{
				"requests": map[string]any{"cpu": IstiodCPURequest, "memory": IstiodMemoryRequest},
				"limits":   map[string]any{"cpu": IstiodCPULimit, "memory": IstiodMemoryLimit},
			}
		case gatewayChart:
			r.vals["rbac"] = map[string]any{"enabled": false}
			r.vals["autoscaling"] = map[string]any{"enabled": true, "minReplicas": 1, "maxReplicas": GatewayMaxReplicas}
			r.vals["resources"] = map[string]any{
				"requests": map[string]any{"cpu": GatewayCPURequest, "memory": GatewayMemoryRequest},
				"limits":   map[string]any{"cpu": GatewayCPULimit, "memory": GatewayMemoryLimit},
			}
		}
	}
	return rels
}

// subMap is vals[k] as a map, made if absent.
func subMap(vals map[string]any, k string) map[string]any {
	m, _ := vals[k].(map[string]any)
	if m == nil {
		m = map[string]any{}
		vals[k] = m
	}
	return m
}

// confine rewrites the charts' ClusterRoles (refusing one it does not
// know) and adds what DCM puts around the control plane in the logical
// cloud's namespaces: istiod's Roles, the NetworkPolicies (netpol.go), the
// ResourceQuota and LimitRange (quota.go).
func confine(in Input, objs []object) ([]object, error) {
	var mutating, validating []string
	for _, o := range objs {
		switch o.str("kind") {
		case "MutatingWebhookConfiguration":
			mutating = append(mutating, o.name())
		case "ValidatingWebhookConfiguration":
			validating = append(validating, o.name())
		}
	}
	slices.Sort(mutating)
	slices.Sort(validating)
	sa := istiodServiceAccount(in.Revision)
	for _, o := range objs {
		switch o.str("kind") {
		case "ClusterRole":
			switch name := o.name(); {
			case strings.HasPrefix(name, RevisionClaimPrefix):
				if rules, _ := o["rules"].([]any); len(rules) > 0 {
					return nil, fmt.Errorf("the revision claim %s grants rights", name)
				}
			case strings.HasPrefix(name, istiodClusterRolePrefix):
				o["rules"] = istiodClusterRules(mutating, validating)
			case strings.HasPrefix(name, readerClusterRolePrefix):
				o["rules"] = readerClusterRules()
			default:
				return nil, fmt.Errorf("the charts rendered ClusterRole %s, which DCM does not confine", name)
			}
		case "ClusterRoleBinding", "RoleBinding":
			if err := checkSubjects(o, in.IstioNamespace, sa); err != nil {
				return nil, err
			}
		}
	}
	labels := kube.Labels(in.Project, in.LogicalCloud)
	for _, ns := range logicalCloudNamespaces(in) {
		meta := kube.Meta{Name: IstiodRoleName(in.Revision), Namespace: ns, Labels: labels}
		role, err := parseObject(kube.Manifest("rbac.authorization.k8s.io/v1", "Role", meta, map[string]any{"rules": istiodNamespaceRules(ns == in.IstioNamespace)}))
		if err != nil {
			return nil, err
		}
		binding, err := parseObject(kube.Manifest("rbac.authorization.k8s.io/v1", "RoleBinding", meta, map[string]any{
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": meta.Name},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": sa, "namespace": in.IstioNamespace}},
		}))
		if err != nil {
			return nil, err
		}
		objs = append(objs, role, binding)
	}
	meta := kube.Meta{Name: ReaderRoleName(in.Revision), Namespace: in.IstioNamespace, Labels: labels}
	role, err := parseObject(kube.Manifest("rbac.authorization.k8s.io/v1", "Role", meta, map[string]any{"rules": readerNamespaceRules()}))
	if err != nil {
		return nil, err
	}
	binding, err := parseObject(kube.Manifest("rbac.authorization.k8s.io/v1", "RoleBinding", meta, map[string]any{
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": meta.Name},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "istio-reader-service-account", "namespace": in.IstioNamespace}},
	}))
	if err != nil {
		return nil, err
	}
	objs = append(objs, role, binding)
	extra, err := namespaceGuards(in)
	if err != nil {
		return nil, err
	}
	return append(objs, extra...), nil
}

// checkSubjects refuses a binding of anything but istiod's or the
// reader's ServiceAccount of the istio namespace (the gateways need no
// Kubernetes API: their Roles are off).
func checkSubjects(o object, istioNS, istiod string) error {
	subjects, _ := o["subjects"].([]any)
	for _, s := range subjects {
		m, _ := s.(map[string]any)
		kind, _ := m["kind"].(string)
		name, _ := m["name"].(string)
		ns, _ := m["namespace"].(string)
		if ns == "" && o.str("kind") == "RoleBinding" {
			ns = o.namespace()
		}
		if kind != "ServiceAccount" || ns != istioNS || (name != istiod && name != "istio-reader-service-account") {
			return fmt.Errorf("%s %s binds %s %s/%s", o.str("kind"), o.name(), kind, ns, name)
		}
	}
	return nil
}

// logicalCloudNamespaces are the istio namespace and the workload
// namespace (when known and distinct).
func logicalCloudNamespaces(in Input) []string {
	out := []string{in.IstioNamespace}
	if in.WorkloadNamespace != "" && in.WorkloadNamespace != in.IstioNamespace {
		out = append(out, in.WorkloadNamespace)
	}
	return out
}
