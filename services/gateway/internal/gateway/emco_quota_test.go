package gateway

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
)

// TestEMCOQuota: EMCO's dialect answers a quota as {metadata, spec} (no
// field of DCM's), a scoped one with Kubernetes' ResourceQuotaSpec as its
// spec, so that its scopes are not lost.
func TestEMCOQuota(t *testing.T) {
	t.Parallel()
	hard, err := structpb.NewStruct(map[string]any{"pods": "2"})
	require.NoError(t, err)
	md := &typesv1.Metadata{Name: "q", Description: "d"}
	plain, err := json.Marshal(toEMCOQuota(&quotav1.Quota{Metadata: md, Spec: hard, User: "ann",
		EnforcedBy: &quotav1.Enforcement{ResourceQuota: "users-total", Limits: "namespace"}}))
	require.NoError(t, err)
	require.JSONEq(t, `{"metadata":{"name":"q","description":"d","userData1":"","userData2":""},"spec":{"pods":"2"}}`, string(plain))
	scoped, err := json.Marshal(toEMCOQuota(&quotav1.Quota{Metadata: md, Spec: hard, Scopes: []string{"NotTerminating"},
		ScopeSelector: &quotav1.ScopeSelector{MatchExpressions: []*quotav1.ScopeRequirement{
			{ScopeName: "PriorityClass", Operator: "In", Values: []string{"high"}}, {ScopeName: "BestEffort", Operator: "Exists"}}}}))
	require.NoError(t, err)
	require.JSONEq(t, `{"metadata":{"name":"q","description":"d","userData1":"","userData2":""},"spec":{"hard":{"pods":"2"},
	  "scopes":["NotTerminating"],"scopeSelector":{"matchExpressions":[{"scopeName":"PriorityClass","operator":"In","values":["high"]},
	  {"scopeName":"BestEffort","operator":"Exists"}]}}}`, string(scoped))
}
