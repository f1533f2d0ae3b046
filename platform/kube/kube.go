// Package kube checks input against Kubernetes' own rules (RBAC rules,
// ResourceQuota hard maps, certificate signing requests) and reports the
// offending field by the path the caller wrote, names the Kubernetes
// identities of logical clouds' users and the objects they share a scope
// with other logical clouds in (identity.go), and renders the objects a
// logical cloud puts on clusters as JSON, labelled with their logical
// cloud. It knows no service and talks to no cluster: the services that
// store such input or render it, and core, which checks a whole logical
// cloud before it writes any part of it, share it.
package kube

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dcm-project/dcm/platform/errs"
)

// Verbs are the RBAC verbs a permission may grant: the API verbs and the
// special ones Kubernetes authorizes (use, bind, escalate, impersonate,
// approve, sign), and "*".
var Verbs = []string{
	"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection",
	"use", "bind", "escalate", "impersonate", "approve", "sign", "*",
}

var resourceName = regexp.MustCompile(`^(\*|[a-z][a-z0-9.-]*)(/(\*|[a-z][a-z0-9.-]*))?$`)

// CheckRule checks an RBAC rule: at least one API group (each "", "*" or
// a DNS subdomain such as apps or stable.example.com), at least one
// resource (lower case, optionally with a subresource: "pods/log", "*")
// and at least one verb of Verbs. field prefixes the names in errors
// ("user-permissions[0]" gives "user-permissions[0].verbs[1]").
func CheckRule(field string, apiGroups, resources, verbs []string) error {
	at := func(name string, i int) string { return fmt.Sprintf("%s[%d]", join(field, name), i) }
	if len(apiGroups) == 0 {
		return errs.Invalid(join(field, "apiGroups"), `at least one API group is required ("" is the core group)`)
	}
	for i, g := range apiGroups {
		if g == "" || g == "*" {
			continue
		}
		if msgs := validation.IsDNS1123Subdomain(g); len(msgs) > 0 {
			return errs.Invalid(at("apiGroups", i), "%q is not an API group: %s", g, strings.Join(msgs, "; "))
		}
	}
	if len(resources) == 0 {
		return errs.Invalid(join(field, "resources"), "at least one resource is required")
	}
	for i, r := range resources {
		if !resourceName.MatchString(r) {
			return errs.Invalid(at("resources", i), `%q is not a resource name (lower case, e.g. "pods", "pods/log", "*")`, r)
		}
	}
	if len(verbs) == 0 {
		return errs.Invalid(join(field, "verbs"), "at least one verb is required")
	}
	for i, v := range verbs {
		if !slices.Contains(Verbs, v) {
			return errs.Invalid(at("verbs", i), "%q is not a verb; use one of %s", v, strings.Join(Verbs, ", "))
		}
	}
	return nil
}

// Amount is one entry of a ResourceQuota hard map.
type Amount struct {
	Resource string
	Quantity string
}

// ParseHard checks a ResourceQuota hard map given as JSON: each key a
// Kubernetes resource name (cpu, limits.memory, requests.nvidia.com/gpu,
// count/deployments.apps, dummy/dummyResource), each value a non-negative
// quantity given as a string or a number. It answers the entries in
// canonical form, ordered by resource. field names the map ("spec").
func ParseHard(field string, hard *structpb.Struct) ([]Amount, error) {
	names := make([]string, 0, len(hard.GetFields()))
	for k := range hard.GetFields() {
		names = append(names, k)
	}
	slices.Sort(names)
	out := make([]Amount, 0, len(names))
	for _, name := range names {
		f := join(field, name)
		if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
			return nil, errs.Invalid(f, "%q is not a Kubernetes resource name: %s", name, strings.Join(msgs, "; "))
		}
		raw, err := quantityText(hard.GetFields()[name])
		if err != nil {
			return nil, errs.Invalid(f, "%s", err.Error())
		}
		q, err := resource.ParseQuantity(raw)
		if err != nil {
			return nil, errs.Invalid(f, "%q is not a Kubernetes quantity (e.g. 4, 500m, 16Gi)", raw)
		}
		if q.Sign() < 0 {
			return nil, errs.Invalid(f, "%q is negative", raw)
		}
		out = append(out, Amount{Resource: name, Quantity: q.String()})
	}
	return out, nil
}

func quantityText(v *structpb.Value) (string, error) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return k.StringValue, nil
	case *structpb.Value_NumberValue:
		n := k.NumberValue
		if math.IsInf(n, 0) || math.IsNaN(n) {
			return "", fmt.Errorf("not a finite number")
		}
		return strconv.FormatFloat(n, 'f', -1, 64), nil
	default:
		return "", fmt.Errorf("must be a quantity, as a string or a number")
	}
}

// HardStruct is the JSON form of a hard map: resource to quantity string.
func HardStruct(hard []Amount) *structpb.Struct {
	s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(hard))}
	for _, a := range hard {
		s.Fields[a.Resource] = structpb.NewStringValue(a.Quantity)
	}
	return s
}

// ParseHardText reads a hard map written as "cpu=8,memory=32Gi,pods=100"
// (how DCM_DEFAULT_QUOTA configures it); empty text is an empty map.
func ParseHardText(field, text string) ([]Amount, error) {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for item := range strings.SplitSeq(text, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, errs.Invalid(field, "%q is not resource=quantity", item)
		}
		s.Fields[strings.TrimSpace(k)] = structpb.NewStringValue(strings.TrimSpace(v))
	}
	return ParseHard(field, s)
}

// Logical cloud levels: what a logical cloud's user gets on each cluster.
const (
	// LevelStandard is a namespace and a user with Roles in it.
	LevelStandard = "standard"
	// LevelAdmin reuses the clusters' admin access: no user, no namespace.
	LevelAdmin = "admin"
	// LevelPrivileged is standard, plus ClusterRoles and Roles anywhere.
	LevelPrivileged = "privileged"
)

// PermissionNamespace resolves where a permission of a logical cloud at
// level applies. A standard logical cloud's user has its namespace only:
// empty means that one, any other is refused. A privileged one's may name
// any namespace, and empty means cluster-wide (a ClusterRole). An admin
// one has no user to grant anything to.
func PermissionNamespace(field, level, lcNamespace, ns string) (string, error) {
	switch level {
	case LevelAdmin:
		return "", errs.FailedPrecondition("an admin logical cloud has no user to grant permissions to")
	case LevelPrivileged:
		return ns, nil
	}
	if ns == "" || ns == lcNamespace {
		return lcNamespace, nil
	}
	return "", errs.Invalid(field, "a standard logical cloud's user has namespace %q only; cluster-wide or other namespaces need level privileged", lcNamespace)
}

func join(field, name string) string {
	if field == "" {
		return name
	}
	return field + "." + name
}
