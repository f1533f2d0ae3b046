package core

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
)

// TestPlanQuotas: seed 002's body gives each user's quota with its user
// (the quota service sums them into the namespace's users-total); the
// users' sum is held to the maximum unless an admin gives it; a user's
// quota has no scopes; the logical cloud's resources may be Kubernetes'
// ResourceQuotaSpec with scopes, checked with Kubernetes' rules.
func TestPlanQuotas(t *testing.T) {
	t.Parallel()
	plan := func(body string, g grants) (*plan, error) {
		t.Helper()
		req := &corev1.CreateLogicalCloudRequest{}
		require.NoError(t, protojson.Unmarshal([]byte(body), req))
		req.Project = "p1"
		return planCreate(req, g)
	}
	fieldOf := func(err error, code codes.Code) string {
		t.Helper()
		require.Equal(t, code, errs.Code(err), "%v", err)
		return errs.FieldOf(errs.ToStatus(err))
	}
	two := `{"name": "lc-1", "user": [{"name": "user-1", "quota": {"cpu": "3", "pods": 10}}, {"name": "user-2", "quota": {"cpu": "2"}}]}`
	maximum := grants{Tenancy: Tenancy{MaxQuota: []kube.Amount{{Resource: "cpu", Quantity: "4"}}}}
	_, err := plan(two, maximum)
	require.Equal(t, "user[1].quota.cpu", fieldOf(err, codes.PermissionDenied), "3 + 2 cpu is above the maximum 4, each within it")
	require.ErrorContains(t, err, "add up to 5 cpu")
	admin := maximum
	admin.mayGrant = true
	p, err := plan(two, admin)
	require.NoError(t, err)
	require.Len(t, p.quotas, 2)
	for i, q := range p.quotas {
		require.Equal(t, []string{"user-1", "user-2"}[i], q.GetUser())
		require.Equal(t, q.GetUser()+"-quota", q.GetMetadata().GetName())
	}

	_, err = plan(`{"name": "lc-1", "user": {"name": "user-1", "quota": {"hard": {"pods": 1}, "scopes": ["BestEffort"]}}}`, grants{})
	require.Equal(t, "user[0].quota.scopes", fieldOf(err, codes.InvalidArgument))
	_, err = plan(`{"name": "lc-1", "resources": {"hard": {"pods": 1}, "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]}}}`, grants{})
	require.Equal(t, "resources.scopeSelector.matchExpressions[0].values", fieldOf(err, codes.InvalidArgument))
	p, err = plan(`{"name": "lc-1", "resources": {"hard": {"pods": 1}, "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}}`, grants{})
	require.NoError(t, err)
	require.Empty(t, p.quotas[0].GetUser())
}
