package kube

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// Tenant isolation: what a logical cloud may ask for on clusters it shares
// with other tenants, and what only an admin may grant. docs/security.md
// ("Tenant isolation") explains the rules.

// Grant is one RBAC permission asked for a logical cloud's users.
type Grant struct {
	Namespace                   string
	APIGroups, Resources, Verbs []string
}

// escalationVerbs let a subject act beyond the rights it holds.
var escalationVerbs = []string{"escalate", "bind", "impersonate", "approve", "sign"}

// writeVerbs change objects ("*" is every verb).
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection", "*"}

// guarded are core-group resources a tenant may read but never write: its
// quota, its limit ranges and its namespace itself.
var guarded = []string{"resourcequotas", "limitranges", "namespaces"}

// clusterOnly are resources no tenant below level privileged may name.
var clusterOnly = []string{"nodes", "certificatesigningrequests/approval", "certificatesigningrequests/status"}

const rbacAPIGroup = "rbac.authorization.k8s.io"

// networkingAPIGroup holds networkpolicies: a tenant reads DCM's
// dcm-ingress and dcm-egress in its namespace but writes no policy, since
// NetworkPolicies add up and one of its own could let in or out what
// DCM's deny (docs/security.md, "Tenant isolation").
const networkingAPIGroup = "networking.k8s.io"

// CheckGrant checks permission g of a logical cloud at level whose
// namespace is lcNamespace, and resolves the namespace it applies in (see
// PermissionNamespace). Only an admin (mayGrant) may grant outside the
// logical cloud's own namespace, cluster-wide included: others get
// PermissionDenied. Below level privileged a rule may not escalate: no
// escalate, bind, impersonate, approve or sign verb, no nodes or CSR
// approval, no "*" verb on RBAC objects, and no write to resourcequotas,
// limitranges or namespaces (nor to "*" resources of the core group,
// which include them), nor to networkpolicies (nor "*" of their group);
// but "*" in every list, in the logical cloud's own namespace, is namespace
// admin (IsNamespaceAdmin), rendered as NamespaceAdminRules. The error
// names the field and the rule.
func CheckGrant(field, level, lcNamespace string, g Grant, mayGrant bool) (string, error) {
	ns, err := PermissionNamespace(join(field, "namespace"), level, lcNamespace, g.Namespace)
	if err != nil {
		return "", err
	}
	if err := CheckRule(field, g.APIGroups, g.Resources, g.Verbs); err != nil {
		return "", err
	}
	if ns != lcNamespace && !mayGrant {
		where := "cluster-wide"
		if ns != "" {
			where = fmt.Sprintf("in namespace %q", ns)
		}
		return "", errs.Forbidden(join(field, "namespace"), "only an admin may grant a permission %s: a logical cloud's own namespace is %q", where, lcNamespace)
	}
	if level == LevelPrivileged {
		return ns, nil
	}
	if ns == lcNamespace && ns != "" && IsNamespaceAdmin(g.APIGroups, g.Resources, g.Verbs) {
		// Rendered as namespace admin, not as "*" (nsadmin.go).
		return ns, nil
	}
	for i, v := range g.Verbs {
		if slices.Contains(escalationVerbs, v) {
			return "", errs.Invalid(fmt.Sprintf("%s[%d]", join(field, "verbs"), i),
				"verb %q lets a tenant act beyond its own rights; it needs level privileged", v)
		}
	}
	core := slices.Contains(g.APIGroups, "") || slices.Contains(g.APIGroups, "*")
	rbac := slices.Contains(g.APIGroups, rbacAPIGroup) || slices.Contains(g.APIGroups, "*")
	networking := slices.Contains(g.APIGroups, networkingAPIGroup) || slices.Contains(g.APIGroups, "*")
	writes := slices.ContainsFunc(g.Verbs, func(v string) bool { return slices.Contains(writeVerbs, v) })
	for i, r := range g.Resources {
		at := fmt.Sprintf("%s[%d]", join(field, "resources"), i)
		base, _, _ := strings.Cut(r, "/")
		switch {
		case slices.Contains(clusterOnly, r) || base == "nodes":
			return "", errs.Invalid(at, "%q is not a tenant's to use; it needs level privileged", r)
		case rbac && slices.Contains(g.Verbs, "*") && (base == "*" || strings.HasPrefix(base, "role") || strings.HasPrefix(base, "clusterrole")):
			return "", errs.Invalid(join(field, "verbs"), `verb "*" on %s objects includes escalate and bind; list the verbs`, rbacAPIGroup)
		case core && writes && slices.Contains(guarded, base):
			return "", errs.Invalid(at, "a tenant may not change its %s; only read verbs (get, list, watch) are allowed on it", base)
		case core && writes && base == "*":
			return "", errs.Invalid(at, `write verbs on "*" in the core API group include the tenant's resourcequotas, limitranges and namespace; list the resources instead`)
		case networking && writes && (base == "networkpolicies" || base == "*"):
			return "", errs.Invalid(at, "a tenant may not change network policies (DCM's dcm-ingress and dcm-egress isolate its namespace; a policy of its own could only open what they close); only read verbs (get, list, watch) are allowed on networkpolicies. Open ingress with spec.allow-ingress-from")
		}
	}
	return ns, nil
}

// reservedNamespaces are never a logical cloud's: they belong to the
// cluster.
var reservedNamespaces = []string{"default"}

// CheckNamespace refuses a namespace a logical cloud may not take: kube-*,
// default, *-system (but <lc>-istio-system, the namespace DCM makes for a
// logical cloud's service mesh), and the installation's reserved list
// (DCM_RESERVED_NAMESPACES: names, or prefixes ending in "*").
func CheckNamespace(field, ns, lc string, reserved []string) error {
	switch {
	case strings.HasPrefix(ns, "kube-"), slices.Contains(reservedNamespaces, ns):
		return errs.Invalid(field, "namespace %q belongs to the cluster; choose another", ns)
	case strings.HasSuffix(ns, "-system") && ns != lc+"-istio-system":
		return errs.Invalid(field, "namespace %q: names ending in -system are kept for system components; choose another", ns)
	case slices.ContainsFunc(reserved, func(r string) bool { return reservedBy(r, ns) }):
		return errs.Invalid(field, "namespace %q is reserved by this installation for a cluster add-on (DCM_RESERVED_NAMESPACES); choose another", ns)
	}
	return nil
}

// reservedBy says whether entry r of the reserved list takes ns: r itself,
// or every name r starts when it ends in "*".
func reservedBy(r, ns string) bool {
	if prefix, ok := strings.CutSuffix(r, "*"); ok {
		return strings.HasPrefix(ns, prefix)
	}
	return r == ns
}

// ParseList reads a comma-separated list, blanks dropped.
func ParseList(text string) []string {
	var out []string
	for item := range strings.SplitSeq(text, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// Pod Security Admission levels a logical cloud's namespace may enforce.
const (
	PodSecurityPrivileged = "privileged"
	PodSecurityBaseline   = "baseline"
	PodSecurityRestricted = "restricted"
)

// PodSecurityLabelPrefix starts the namespace labels of Pod Security
// Admission: <prefix>enforce makes the API server refuse pods above the
// level; <prefix>warn and <prefix>audit report them.
const PodSecurityLabelPrefix = "pod-security.kubernetes.io/"

// DefaultPodSecurity reads the installation's default pod security level
// (DCM_POD_SECURITY): baseline when empty, or restricted; privileged is
// never a default (it is set per logical cloud, by an admin).
func DefaultPodSecurity(setting string) (string, error) {
	switch setting {
	case "":
		return PodSecurityBaseline, nil
	case PodSecurityBaseline, PodSecurityRestricted:
		return setting, nil
	}
	return "", fmt.Errorf("DCM_POD_SECURITY %q: use %s or %s (privileged is set per logical cloud, by an admin)",
		setting, PodSecurityBaseline, PodSecurityRestricted)
}

// CheckPodSecurity checks a logical cloud's pod security level: baseline
// or restricted for anyone; privileged only at level privileged or admin,
// and only by an admin (mayGrant). Empty is the installation's default.
func CheckPodSecurity(field, level, ps string, mayGrant bool) error {
	switch ps {
	case "", PodSecurityBaseline, PodSecurityRestricted:
		return nil
	case PodSecurityPrivileged:
		if level == LevelStandard {
			return errs.Invalid(field, "pod security %q needs level privileged", ps)
		}
		if !mayGrant {
			return errs.Forbidden(field, "only an admin may set pod security %q", ps)
		}
		return nil
	}
	return errs.Invalid(field, "%q is not a pod security level: %s, %s or %s", ps, PodSecurityBaseline, PodSecurityRestricted, PodSecurityPrivileged)
}

// MergeHard lays hard over base: base's entries stay unless hard sets
// them. The result is ordered by resource.
func MergeHard(base, hard []Amount) []Amount {
	out := slices.Clone(hard)
	for _, b := range base {
		if !slices.ContainsFunc(hard, func(a Amount) bool { return a.Resource == b.Resource }) {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b Amount) int { return strings.Compare(a.Resource, b.Resource) })
	return out
}

// CheckMax refuses an entry of hard above the installation's maximum for
// its resource, unless the caller may grant more (an admin). field names
// the hard map.
func CheckMax(field string, hard, maximum []Amount, mayGrant bool) error {
	if a, m, over := aboveMax(hard, maximum); over && !mayGrant {
		return errs.Forbidden(join(field, a.Resource), "%s exceeds this installation's maximum %s (DCM_MAX_QUOTA); only an admin may set more", a.Quantity, m)
	}
	return nil
}

// aboveMax is the first entry of hard above the maximum for its resource,
// and that maximum.
func aboveMax(hard, maximum []Amount) (Amount, string, bool) {
	for _, a := range hard {
		i := slices.IndexFunc(maximum, func(m Amount) bool { return m.Resource == a.Resource })
		if i < 0 {
			continue
		}
		q, m := resource.MustParse(a.Quantity), resource.MustParse(maximum[i].Quantity)
		if q.Cmp(m) > 0 {
			return a, maximum[i].Quantity, true
		}
	}
	return Amount{}, "", false
}

// systemLabelDomains are the label key domains the system's own labels
// use (and their subdomains): a tenant's namespace label there could
// switch off Pod Security Admission, take another tenant's identity
// (dcm.io/logical-cloud) or move the namespace into a mesh.
var systemLabelDomains = []string{"kubernetes.io", "k8s.io", "dcm.io", "istio.io"}

// systemLabelKeys are unprefixed keys with a system meaning.
var systemLabelKeys = []string{"istio-injection"}

// MaxLabels is the most labels a logical cloud puts on its namespace.
const MaxLabels = 64

// CheckLabels checks a logical cloud's own namespace labels at field
// ("spec.labels"): Kubernetes label syntax, each key once, and none of the
// system's keys.
func CheckLabels(field string, labels []*typesv1.Label) error {
	if len(labels) > MaxLabels {
		return errs.Invalid(field, "at most %d labels, got %d", MaxLabels, len(labels))
	}
	seen := map[string]bool{}
	for _, l := range labels {
		k, v := l.GetKey(), l.GetValue()
		f := field + "." + k
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return errs.Invalid(f, "%q is not a label key: %s", k, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			return errs.Invalid(f, "%q is not a label value: %s", v, strings.Join(msgs, "; "))
		}
		if seen[k] {
			return errs.Invalid(f, "is given twice")
		}
		seen[k] = true
		if slices.Contains(systemLabelKeys, k) {
			return errs.Invalid(f, "is the system's label; a logical cloud may not set it")
		}
		prefix, _, found := strings.Cut(k, "/")
		if !found {
			continue
		}
		for _, d := range systemLabelDomains {
			if prefix == d || strings.HasSuffix(prefix, "."+d) {
				return errs.Invalid(f, "keys in the %s domain are the system's; a logical cloud may not set them", d)
			}
		}
	}
	return nil
}
