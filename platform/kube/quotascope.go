package kube

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dcm-project/dcm/platform/errs"
)

// The ResourceQuota scopes Kubernetes knows (core/v1 ResourceQuotaScope).
const (
	ScopeTerminating               = "Terminating"
	ScopeNotTerminating            = "NotTerminating"
	ScopeBestEffort                = "BestEffort"
	ScopeNotBestEffort             = "NotBestEffort"
	ScopePriorityClass             = "PriorityClass"
	ScopeCrossNamespacePodAffinity = "CrossNamespacePodAffinity"
	ScopeVolumeAttributesClass     = "VolumeAttributesClass"
)

// QuotaScopes are the scopes of Kubernetes' IsStandardResourceQuotaScope.
var QuotaScopes = []string{ScopeTerminating, ScopeNotTerminating, ScopeBestEffort, ScopeNotBestEffort,
	ScopePriorityClass, ScopeCrossNamespacePodAffinity, ScopeVolumeAttributesClass}

// The scope selector operators (core/v1 ScopeSelectorOperator).
const (
	ScopeOpIn           = "In"
	ScopeOpNotIn        = "NotIn"
	ScopeOpExists       = "Exists"
	ScopeOpDoesNotExist = "DoesNotExist"
)

// ScopeRequirement is one of a scope selector's matchExpressions.
type ScopeRequirement struct {
	ScopeName string
	Operator  string
	Values    []string
}

// Scopes are what a ResourceQuota tracks: its scopes and its
// scopeSelector's matchExpressions (Selector is set when the quota has a
// scopeSelector, possibly with no expressions).
type Scopes struct {
	Scopes   []string
	Selector *[]ScopeRequirement
}

// Empty reports whether the quota tracks every object (no scope).
func (s Scopes) Empty() bool {
	return len(s.Scopes) == 0 && (s.Selector == nil || len(*s.Selector) == 0)
}

// names are all the scopes the quota names, in its scopes and selector.
func (s Scopes) names() []string {
	out := slices.Clone(s.Scopes)
	if s.Selector != nil {
		for _, r := range *s.Selector {
			out = append(out, r.ScopeName)
		}
	}
	return out
}

// ScopeFields are the JSON names a dialect gives the scope fields, for
// errors: Kubernetes' (K8sScopeFields) or the project's (kebab-case).
type ScopeFields struct {
	Scopes, ScopeSelector, MatchExpressions, ScopeName, Operator, Values string
}

var (
	// K8sScopeFields are Kubernetes' names (ResourceQuotaSpec).
	K8sScopeFields = ScopeFields{"scopes", "scopeSelector", "matchExpressions", "scopeName", "operator", "values"}
	// APIScopeFields are the project's names (dcm.quota.v1.Quota).
	APIScopeFields = ScopeFields{"scopes", "scope-selector", "match-expressions", "scope-name", "operator", "values"}
)

// podCountResources, podComputeResources, pvcCountResources and
// pvcStorageResources are Kubernetes' sets of
// IsResourceQuotaScopeValidForResource.
var (
	podCountResources   = []string{"pods"}
	podComputeResources = []string{"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"}
	pvcCountResources   = []string{"persistentvolumeclaims"}
	pvcStorageResources = []string{"requests.storage"}
)

// standardQuotaResources is Kubernetes' standardQuotaResources: the
// resources whose scope compatibility it checks (IsStandardQuotaResourceName,
// with the huge page names).
var standardQuotaResources = []string{"cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
	"requests.storage", "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
	"pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "persistentvolumeclaims",
	"configmaps", "services.nodeports", "services.loadbalancers"}

func isStandardQuotaResource(name string) bool {
	return slices.Contains(standardQuotaResources, name) ||
		strings.HasPrefix(name, "hugepages-") || strings.HasPrefix(name, "requests.hugepages-")
}

// ScopeValidFor is Kubernetes' IsResourceQuotaScopeValidForResource: BestEffort
// tracks pods only; Terminating, NotTerminating, NotBestEffort,
// PriorityClass and CrossNamespacePodAffinity track pods and their cpu and
// memory; VolumeAttributesClass tracks persistent volume claims and their
// storage. A resource outside Kubernetes' standard quota resources (an
// extended resource) is not checked.
func ScopeValidFor(scope, res string) bool {
	if !isStandardQuotaResource(res) {
		return true
	}
	switch scope {
	case ScopeTerminating, ScopeNotTerminating, ScopeNotBestEffort, ScopePriorityClass, ScopeCrossNamespacePodAffinity:
		return slices.Contains(podCountResources, res) || slices.Contains(podComputeResources, res)
	case ScopeBestEffort:
		return slices.Contains(podCountResources, res)
	case ScopeVolumeAttributesClass:
		return slices.Contains(pvcCountResources, res) || slices.Contains(pvcStorageResources, res)
	}
	return true
}

// ForScopes keeps the entries of hard that every scope of s may track:
// what of a base quota can be laid over a scoped one.
func (s Scopes) ForScopes(hard []Amount) []Amount {
	names := s.names()
	return slices.DeleteFunc(slices.Clone(hard), func(a Amount) bool {
		return slices.ContainsFunc(names, func(scope string) bool { return !ScopeValidFor(scope, a.Resource) })
	})
}

// conflictingScopes are the pairs Kubernetes refuses together.
var conflictingScopes = [][2]string{{ScopeBestEffort, ScopeNotBestEffort}, {ScopeTerminating, ScopeNotTerminating}}

// CheckScopes applies Kubernetes' ValidateResourceQuotaSpec rules on
// scopes (validateResourceQuotaScopes, validateScopedResourceSelectorRequirement)
// to a quota's hard map and scopes: each scope a standard one and able to
// track every resource of hard; no conflicting pair (BestEffort and
// NotBestEffort, Terminating and NotTerminating); in the selector, the
// operator Exists for the scopes that take no value, values for In and
// NotIn and none for Exists and DoesNotExist. field is the quota's path
// (the errors name field.<scopes field>...); n the dialect's names.
func CheckScopes(field string, n ScopeFields, hard []Amount, s Scopes) error {
	for i, scope := range s.Scopes {
		at := fmt.Sprintf("%s[%d]", join(field, n.Scopes), i)
		if !slices.Contains(QuotaScopes, scope) {
			return errs.Invalid(at, "%q is not a quota scope: use one of %s", scope, strings.Join(QuotaScopes, ", "))
		}
		if err := checkScopeResources(at, scope, hard); err != nil {
			return err
		}
	}
	if err := checkConflicts(join(field, n.Scopes), s.Scopes); err != nil {
		return err
	}
	if s.Selector == nil {
		return nil
	}
	exprs := join(join(field, n.ScopeSelector), n.MatchExpressions)
	var names []string
	for i, r := range *s.Selector {
		at := fmt.Sprintf("%s[%d]", exprs, i)
		if !slices.Contains(QuotaScopes, r.ScopeName) {
			return errs.Invalid(join(at, n.ScopeName), "%q is not a quota scope: use one of %s", r.ScopeName, strings.Join(QuotaScopes, ", "))
		}
		if err := checkScopeResources(join(at, n.ScopeName), r.ScopeName, hard); err != nil {
			return err
		}
		switch r.ScopeName {
		case ScopeBestEffort, ScopeNotBestEffort, ScopeTerminating, ScopeNotTerminating, ScopeCrossNamespacePodAffinity:
			if r.Operator != ScopeOpExists {
				return errs.Invalid(join(at, n.Operator), "must be %q for scope %s (it takes no value), got %q", ScopeOpExists, r.ScopeName, r.Operator)
			}
		}
		switch r.Operator {
		case ScopeOpIn, ScopeOpNotIn:
			if len(r.Values) == 0 {
				return errs.Invalid(join(at, n.Values), "at least one value is required when the operator is %s", r.Operator)
			}
		case ScopeOpExists, ScopeOpDoesNotExist:
			if len(r.Values) != 0 {
				return errs.Invalid(join(at, n.Values), "must be empty when the operator is %s", r.Operator)
			}
		default:
			return errs.Invalid(join(at, n.Operator), "%q is not a scope selector operator: use In, NotIn, Exists or DoesNotExist", r.Operator)
		}
		names = append(names, r.ScopeName)
	}
	return checkConflicts(exprs, names)
}

func checkScopeResources(field, scope string, hard []Amount) error {
	for _, a := range hard {
		if !ScopeValidFor(scope, a.Resource) {
			return errs.Invalid(field, "scope %s cannot track %q: %s", scope, a.Resource, scopeTracks(scope))
		}
	}
	return nil
}

// scopeTracks says in words what a scope tracks.
func scopeTracks(scope string) string {
	switch scope {
	case ScopeBestEffort:
		return "a BestEffort quota tracks pods only (hard: pods)"
	case ScopeVolumeAttributesClass:
		return "a VolumeAttributesClass quota tracks persistentvolumeclaims and requests.storage only"
	}
	return "a " + scope + " quota tracks pods and their cpu and memory only (pods, cpu, memory, requests.cpu, requests.memory, limits.cpu, limits.memory)"
}

func checkConflicts(field string, scopes []string) error {
	for _, pair := range conflictingScopes {
		if slices.Contains(scopes, pair[0]) && slices.Contains(scopes, pair[1]) {
			return errs.Invalid(field, "scopes %s and %s conflict: a quota has at most one of them", pair[0], pair[1])
		}
	}
	return nil
}

// ParseQuotaSpec reads a quota's spec given either as its hard map (the
// project's form: {"cpu": "4"}) or as Kubernetes' ResourceQuotaSpec
// ({"hard": {...}, "scopes": [...], "scopeSelector": {"matchExpressions":
// [...]}}, seed 002's TenantResourceQuota), told apart by "hard" holding
// an object (no quantity does). k8s reports the second form; its scopes
// are checked (CheckScopes, naming field.scopeSelector...).
func ParseQuotaSpec(field string, spec *structpb.Struct) (hard []Amount, scopes Scopes, k8s bool, err error) {
	if spec.GetFields()["hard"].GetStructValue() == nil {
		hard, err = ParseHard(field, spec)
		return hard, Scopes{}, false, err
	}
	for k := range spec.GetFields() {
		if !slices.Contains([]string{"hard", "scopes", "scopeSelector"}, k) {
			return nil, Scopes{}, true, errs.Invalid(join(field, k), "unknown field %q: a ResourceQuota spec has hard, scopes and scopeSelector", k)
		}
	}
	if hard, err = ParseHard(join(field, "hard"), spec.GetFields()["hard"].GetStructValue()); err != nil {
		return nil, Scopes{}, true, err
	}
	if v, ok := spec.GetFields()["scopes"]; ok {
		if scopes.Scopes, err = stringList(join(field, "scopes"), v); err != nil {
			return nil, Scopes{}, true, err
		}
	}
	if v, ok := spec.GetFields()["scopeSelector"]; ok {
		if scopes.Selector, err = parseSelector(join(field, "scopeSelector"), v); err != nil {
			return nil, Scopes{}, true, err
		}
	}
	return hard, scopes, true, CheckScopes(field, K8sScopeFields, hard, scopes)
}

// parseSelector reads {"matchExpressions": [{scopeName, operator, values}]}.
func parseSelector(field string, v *structpb.Value) (*[]ScopeRequirement, error) {
	if _, null := v.GetKind().(*structpb.Value_NullValue); null {
		return nil, nil
	}
	sel := v.GetStructValue()
	if sel == nil {
		return nil, errs.Invalid(field, "must be an object with matchExpressions")
	}
	out := []ScopeRequirement{}
	for k, e := range sel.GetFields() {
		if k != "matchExpressions" {
			return nil, errs.Invalid(join(field, k), "unknown field %q: a scopeSelector has matchExpressions", k)
		}
		if _, null := e.GetKind().(*structpb.Value_NullValue); null {
			continue
		}
		list := e.GetListValue()
		if list == nil {
			return nil, errs.Invalid(join(field, k), "must be a list of {scopeName, operator, values}")
		}
		for i, x := range list.GetValues() {
			at := fmt.Sprintf("%s[%d]", join(field, k), i)
			r := x.GetStructValue()
			if r == nil {
				return nil, errs.Invalid(at, "must be an object {scopeName, operator, values}")
			}
			var req ScopeRequirement
			for name, f := range r.GetFields() {
				var err error
				switch name {
				case "scopeName":
					req.ScopeName, err = stringValue(join(at, name), f)
				case "operator":
					req.Operator, err = stringValue(join(at, name), f)
				case "values":
					req.Values, err = stringList(join(at, name), f)
				default:
					err = errs.Invalid(join(at, name), "unknown field %q: a match expression has scopeName, operator and values", name)
				}
				if err != nil {
					return nil, err
				}
			}
			out = append(out, req)
		}
	}
	return &out, nil
}

func stringValue(field string, v *structpb.Value) (string, error) {
	s, ok := v.GetKind().(*structpb.Value_StringValue)
	if !ok {
		return "", errs.Invalid(field, "must be a string")
	}
	return s.StringValue, nil
}

func stringList(field string, v *structpb.Value) ([]string, error) {
	if _, null := v.GetKind().(*structpb.Value_NullValue); null {
		return nil, nil
	}
	list := v.GetListValue()
	if list == nil {
		return nil, errs.Invalid(field, "must be a list of strings")
	}
	out := make([]string, 0, len(list.GetValues()))
	for i, e := range list.GetValues() {
		s, err := stringValue(fmt.Sprintf("%s[%d]", field, i), e)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// UsersTotalName names the one ResourceQuota a logical cloud's users'
// quotas become: Kubernetes cannot bound one user inside a namespace, so
// their figures, summed, bound the namespace, all users together.
const UsersTotalName = "users-total"

// SumHard is the users' quotas summed (what UsersTotalName holds): each
// resource that every one of them sets, at the sum of their figures. A
// resource one of them leaves out stays out: that user's quota does not
// bound it, so neither can the sum.
func SumHard(quotas [][]Amount) []Amount {
	if len(quotas) == 0 {
		return nil
	}
	var out []Amount
	for _, a := range quotas[0] {
		sum := resource.MustParse(a.Quantity)
		all := true
		for _, o := range quotas[1:] {
			i := slices.IndexFunc(o, func(b Amount) bool { return b.Resource == a.Resource })
			if i < 0 {
				all = false
				break
			}
			sum.Add(resource.MustParse(o[i].Quantity))
		}
		if all {
			out = append(out, Amount{Resource: a.Resource, Quantity: sum.String()})
		}
	}
	return out
}

// CheckUsersTotal refuses, unless the caller may grant more (an admin),
// users' quotas whose sum (SumHard) is above the installation's maximum:
// the sum is what bounds the namespace. field names the quota being given
// (the error names field.<resource>).
func CheckUsersTotal(field string, total, maximum []Amount, mayGrant bool) error {
	if a, m, over := aboveMax(total, maximum); over && !mayGrant {
		return errs.Forbidden(join(field, a.Resource), "the users' quotas add up to %s %s (ResourceQuota %s, which bounds the namespace), above this installation's maximum %s (DCM_MAX_QUOTA); only an admin may set more",
			a.Quantity, a.Resource, UsersTotalName, m)
	}
	return nil
}
