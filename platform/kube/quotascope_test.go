package kube_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
)

// TestParseQuotaSpecScopes: Kubernetes' ResourceQuotaSpec form is read
// with its scopes, and each rule of ValidateResourceQuotaSpec on scopes
// refuses with the field it concerns.
func TestParseQuotaSpecScopes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		spec  map[string]any
		field string // "" when accepted
	}{
		{"hard map alone", map[string]any{"cpu": "4", "pods": 10}, ""},
		{"seed 002's selector", map[string]any{"hard": map[string]any{"cpu": "400", "pods": "500"},
			"scopeSelector": map[string]any{"matchExpressions": []any{map[string]any{"operator": "In", "scopeName": "PriorityClass", "values": []any{"common"}}}}}, ""},
		{"scopes", map[string]any{"hard": map[string]any{"pods": 5}, "scopes": []any{"BestEffort", "NotTerminating"}}, ""},
		{"Exists without values", map[string]any{"hard": map[string]any{"pods": 5},
			"scopeSelector": map[string]any{"matchExpressions": []any{map[string]any{"operator": "Exists", "scopeName": "Terminating"}}}}, ""},
		{"extended resources are not checked", map[string]any{"hard": map[string]any{"pods": 1, "requests.nvidia.com/gpu": 1}, "scopes": []any{"BestEffort"}}, ""},
		{"In without values", map[string]any{"hard": map[string]any{"pods": 5},
			"scopeSelector": map[string]any{"matchExpressions": []any{map[string]any{"operator": "In", "scopeName": "PriorityClass"}}}},
			"spec.scopeSelector.matchExpressions[0].values"},
		{"NotIn with empty values", map[string]any{"hard": map[string]any{"pods": 5},
			"scopeSelector": map[string]any{"matchExpressions": []any{
				map[string]any{"operator": "Exists", "scopeName": "NotBestEffort"},
				map[string]any{"operator": "NotIn", "scopeName": "PriorityClass", "values": []any{}}}}},
			"spec.scopeSelector.matchExpressions[1].values"},
		{"DoesNotExist with values", map[string]any{"hard": map[string]any{"pods": 5},
			"scopeSelector": map[string]any{"matchExpressions": []any{map[string]any{"operator": "DoesNotExist", "scopeName": "PriorityClass", "values": []any{"x"}}}}},
			"spec.scopeSelector.matchExpressions[0].values"},
		{"Terminating with In", map[string]any{"hard": map[string]any{"pods": 5},
			"scopeSelector": map[string]any{"matchExpressions": []any{map[string]any{"operator": "In", "scopeName": "Terminating", "values": []any{"x"}}}}},
			"spec.scopeSelector.matchExpressions[0].operator"},
		{"unknown operator", map[string]any{"hard": map[string]any{"pods": 5},
			"scopeSelector": map[string]any{"matchExpressions": []any{map[string]any{"operator": "Like", "scopeName": "PriorityClass", "values": []any{"x"}}}}},
			"spec.scopeSelector.matchExpressions[0].operator"},
		{"seed 002's Class is no scope", map[string]any{"hard": map[string]any{"pods": 5},
			"scopeSelector": map[string]any{"matchExpressions": []any{map[string]any{"operator": "In", "scopeName": "Class", "values": []any{"common"}}}}},
			"spec.scopeSelector.matchExpressions[0].scopeName"},
		{"BestEffort tracks pods only", map[string]any{"hard": map[string]any{"pods": 5, "cpu": 1}, "scopes": []any{"BestEffort"}}, "spec.scopes[0]"},
		{"PriorityClass does not track services", map[string]any{"hard": map[string]any{"services": 5},
			"scopeSelector": map[string]any{"matchExpressions": []any{map[string]any{"operator": "Exists", "scopeName": "PriorityClass"}}}},
			"spec.scopeSelector.matchExpressions[0].scopeName"},
		{"BestEffort and NotBestEffort", map[string]any{"hard": map[string]any{"pods": 5}, "scopes": []any{"BestEffort", "NotBestEffort"}}, "spec.scopes"},
		{"Terminating and NotTerminating in the selector", map[string]any{"hard": map[string]any{"pods": 5},
			"scopeSelector": map[string]any{"matchExpressions": []any{
				map[string]any{"operator": "Exists", "scopeName": "Terminating"},
				map[string]any{"operator": "Exists", "scopeName": "NotTerminating"}}}},
			"spec.scopeSelector.matchExpressions"},
		{"unknown scope", map[string]any{"hard": map[string]any{"pods": 5}, "scopes": []any{"Firewall"}}, "spec.scopes[0]"},
		{"unknown key", map[string]any{"hard": map[string]any{"pods": 5}, "scope": []any{"BestEffort"}}, "spec.scope"},
		{"a bad quantity under hard", map[string]any{"hard": map[string]any{"pods": "many"}}, "spec.hard.pods"},
		{"scopes not a list", map[string]any{"hard": map[string]any{"pods": 5}, "scopes": "BestEffort"}, "spec.scopes"},
	} {
		spec, err := structpb.NewStruct(c.spec)
		require.NoError(t, err)
		_, _, _, err = kube.ParseQuotaSpec("spec", spec)
		if c.field == "" {
			require.NoError(t, err, c.name)
			continue
		}
		require.Equal(t, codes.InvalidArgument, errs.Code(err), "%s: %v", c.name, err)
		require.Equal(t, c.field, errs.FieldOf(errs.ToStatus(err)), "%s: %v", c.name, err)
	}
}

// TestCheckScopesProjectNames: the project's dialect names its fields in
// kebab-case.
func TestCheckScopesProjectNames(t *testing.T) {
	t.Parallel()
	sel := []kube.ScopeRequirement{{ScopeName: "PriorityClass", Operator: "Exists", Values: []string{"x"}}}
	err := kube.CheckScopes("quota", kube.APIScopeFields, []kube.Amount{{Resource: "pods", Quantity: "1"}}, kube.Scopes{Selector: &sel})
	require.Equal(t, "quota.scope-selector.match-expressions[0].values", fieldOf(t, err))
}

func TestSumHardAndUsersTotal(t *testing.T) {
	t.Parallel()
	a := []kube.Amount{{Resource: "cpu", Quantity: "1"}, {Resource: "pods", Quantity: "10"}}
	b := []kube.Amount{{Resource: "cpu", Quantity: "500m"}, {Resource: "memory", Quantity: "1Gi"}}
	require.Equal(t, []kube.Amount{{Resource: "cpu", Quantity: "1500m"}}, kube.SumHard([][]kube.Amount{a, b}),
		"what every user bounds, summed; pods and memory are each left out by one")
	require.Empty(t, kube.SumHard(nil))
	maximum := []kube.Amount{{Resource: "cpu", Quantity: "1"}}
	err := kube.CheckUsersTotal("user[1].quota", kube.SumHard([][]kube.Amount{a, b}), maximum, false)
	require.Equal(t, codes.PermissionDenied, errs.Code(err))
	require.ErrorContains(t, err, "user[1].quota.cpu")
	require.NoError(t, kube.CheckUsersTotal("user[1].quota", kube.SumHard([][]kube.Amount{a, b}), maximum, true))
}

func TestScopesForBase(t *testing.T) {
	t.Parallel()
	base := []kube.Amount{{Resource: "cpu", Quantity: "8"}, {Resource: "pods", Quantity: "50"}, {Resource: "services", Quantity: "5"}}
	require.Equal(t, []kube.Amount{{Resource: "pods", Quantity: "50"}}, kube.Scopes{Scopes: []string{"BestEffort"}}.ForScopes(base))
	sel := []kube.ScopeRequirement{{ScopeName: "PriorityClass", Operator: "In", Values: []string{"high"}}}
	require.Equal(t, base[:2], kube.Scopes{Selector: &sel}.ForScopes(base))
	require.Equal(t, base, kube.Scopes{}.ForScopes(base))
}
