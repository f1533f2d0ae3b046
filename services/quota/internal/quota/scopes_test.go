package quota_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/facts/factstest"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/quota/internal/quota"
)

// scopedQuota is a rendered ResourceQuota with its scopes.
type scopedQuota struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Hard          map[string]string `json:"hard"`
		Scopes        []string          `json:"scopes"`
		ScopeSelector *struct {
			MatchExpressions []struct {
				ScopeName string   `json:"scopeName"`
				Operator  string   `json:"operator"`
				Values    []string `json:"values"`
			} `json:"matchExpressions"`
		} `json:"scopeSelector"`
	} `json:"spec"`
}

// quotaService serves a quota service with the default quota def and the
// maximum maximum (ParseHardText forms), told of logical cloud p/lc in
// namespace ns-1.
func quotaService(t *testing.T, def, maximum string) (quotav1.QuotaServiceClient, quotav1.QuotaInternalServiceClient) {
	t.Helper()
	d, err := kube.ParseHardText("DCM_DEFAULT_QUOTA", def)
	require.NoError(t, err)
	m, err := kube.ParseHardText("DCM_MAX_QUOTA", maximum)
	require.NoError(t, err)
	core := factstest.New(t)
	conn := servertest.Serve(t, func(st *store.Store) []server.Service {
		svc, err := quota.New(keep(core, st, "quota"), d, m, quota.Defaults{})
		require.NoError(t, err)
		return []server.Service{svc}
	})
	core.Add("p", "lc", kube.LevelStandard, "ns-1")
	return quotav1.NewQuotaServiceClient(conn), quotav1.NewQuotaInternalServiceClient(conn)
}

func specOf(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return s
}

func renderScoped(t *testing.T, internal quotav1.QuotaInternalServiceClient) map[string]scopedQuota {
	t.Helper()
	r, err := internal.RenderQuotas(context.Background(), &quotav1.RenderQuotasRequest{Project: "p", LogicalCloud: "lc", Level: kube.LevelStandard, Namespace: "ns-1"})
	require.NoError(t, err)
	out := map[string]scopedQuota{}
	for i, m := range r.GetManifests() {
		var q scopedQuota
		require.NoError(t, json.Unmarshal([]byte(m), &q))
		require.Equal(t, r.GetNames()[i], q.Metadata.Name)
		out[q.Metadata.Name] = q
	}
	return out
}

func fieldOfErr(t *testing.T, err error) string {
	t.Helper()
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	return errs.FieldOf(status.Convert(err))
}

// TestScopedQuotas: a quota's scopes and scopeSelector, given in the
// project's form or as Kubernetes' ResourceQuotaSpec in spec, are stored,
// answered in the project's form and rendered into the ResourceQuota,
// over what of the default quota the scopes can track; when every quota
// is scoped the default quota bounds the rest as ResourceQuota
// "default"; Kubernetes' rules refuse bad scopes with the field, and a
// change of scopes (which Kubernetes does not allow) is refused.
func TestScopedQuotas(t *testing.T) {
	t.Parallel()
	c, internal := quotaService(t, "cpu=8,services=5", "pods=50")
	ctx := context.Background()
	create := func(q *quotav1.Quota) (*quotav1.Quota, error) {
		r, err := c.CreateQuota(ctx, &quotav1.CreateQuotaRequest{Project: "p", LogicalCloud: "lc", Quota: q})
		return r.GetQuota(), err
	}
	// Kubernetes' form, as seed 002's TenantResourceQuota gives it.
	got, err := create(&quotav1.Quota{Metadata: &typesv1.Metadata{Name: "high"}, Spec: specOf(t, map[string]any{
		"hard": map[string]any{"pods": 2, "cpu": "1"},
		"scopeSelector": map[string]any{"matchExpressions": []any{
			map[string]any{"scopeName": "PriorityClass", "operator": "In", "values": []any{"high"}}}},
	})})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"cpu": "1", "pods": "2"}, got.GetSpec().AsMap(), "answered in the project's form")
	require.Len(t, got.GetScopeSelector().GetMatchExpressions(), 1)
	require.Equal(t, []string{"high"}, got.GetScopeSelector().GetMatchExpressions()[0].GetValues())
	require.Equal(t, "high", got.GetEnforcedBy().GetResourceQuota())
	require.Equal(t, "namespace", got.GetEnforcedBy().GetLimits())
	// The project's form.
	_, err = create(&quotav1.Quota{Metadata: &typesv1.Metadata{Name: "best-effort"}, Spec: specOf(t, map[string]any{"pods": 3}),
		Scopes: []string{"BestEffort"}})
	require.NoError(t, err)

	rq := renderScoped(t, internal)
	require.Len(t, rq, 3, "two scoped quotas and the default quota for what they leave out")
	require.Equal(t, map[string]string{"pods": "3"}, rq["best-effort"].Spec.Hard, "BestEffort tracks pods only: the default's cpu and services stay out")
	require.Equal(t, []string{"BestEffort"}, rq["best-effort"].Spec.Scopes)
	require.Equal(t, map[string]string{"pods": "2", "cpu": "1"}, rq["high"].Spec.Hard, "PriorityClass tracks cpu, not services")
	require.NotNil(t, rq["high"].Spec.ScopeSelector)
	require.Equal(t, "PriorityClass", rq["high"].Spec.ScopeSelector.MatchExpressions[0].ScopeName)
	require.Equal(t, []string{"high"}, rq["high"].Spec.ScopeSelector.MatchExpressions[0].Values)
	require.Equal(t, map[string]string{"cpu": "8", "services": "5", "pods": "50"}, rq["default"].Spec.Hard)
	require.Empty(t, rq["default"].Spec.Scopes)

	// An unscoped quota bounds the rest: no "default" then.
	_, err = create(&quotav1.Quota{Metadata: &typesv1.Metadata{Name: "all"}, Spec: specOf(t, map[string]any{"pods": 10})})
	require.NoError(t, err)
	rq = renderScoped(t, internal)
	require.NotContains(t, rq, "default")
	require.Equal(t, map[string]string{"cpu": "8", "services": "5", "pods": "10"}, rq["all"].Spec.Hard)

	for _, bad := range []struct {
		q     *quotav1.Quota
		field string
	}{
		{&quotav1.Quota{Spec: specOf(t, map[string]any{"hard": map[string]any{"pods": 1},
			"scopeSelector": map[string]any{"matchExpressions": []any{map[string]any{"scopeName": "PriorityClass", "operator": "In"}}}})},
			"quota.spec.scopeSelector.matchExpressions[0].values"},
		{&quotav1.Quota{Spec: specOf(t, map[string]any{"pods": 1}), ScopeSelector: &quotav1.ScopeSelector{MatchExpressions: []*quotav1.ScopeRequirement{
			{ScopeName: "PriorityClass", Operator: "Exists", Values: []string{"x"}}}}},
			"quota.scope-selector.match-expressions[0].values"},
		{&quotav1.Quota{Spec: specOf(t, map[string]any{"pods": 1}), Scopes: []string{"BestEffort", "NotBestEffort"}}, "quota.scopes"},
		{&quotav1.Quota{Spec: specOf(t, map[string]any{"pods": 1, "cpu": 1}), Scopes: []string{"BestEffort"}}, "quota.scopes[0]"},
		{&quotav1.Quota{Spec: specOf(t, map[string]any{"hard": map[string]any{"pods": 1}, "scopes": []any{"BestEffort"}}), Scopes: []string{"BestEffort"}}, "quota.scopes"},
		{&quotav1.Quota{Spec: specOf(t, map[string]any{"pods": 1}), Scopes: []string{"BestEffort"}, User: "ann"}, "quota.scopes"},
		{&quotav1.Quota{Metadata: &typesv1.Metadata{Name: "default"}, Spec: specOf(t, map[string]any{"pods": 1}), Scopes: []string{"BestEffort"}}, "quota.metadata.name"},
		{&quotav1.Quota{Metadata: &typesv1.Metadata{Name: "users-total"}, Spec: specOf(t, map[string]any{"pods": 1})}, "quota.metadata.name"},
	} {
		if bad.q.Metadata == nil {
			bad.q.Metadata = &typesv1.Metadata{Name: "bad"}
		}
		_, err := create(bad.q)
		require.Equal(t, bad.field, fieldOfErr(t, err))
		_, err = c.GetQuota(ctx, &quotav1.GetQuotaRequest{Project: "p", LogicalCloud: "lc", Name: bad.q.GetMetadata().GetName()})
		require.Equal(t, codes.NotFound, status.Code(err), "nothing stored")
	}

	// Kubernetes keeps a ResourceQuota's scopes; its selector may change.
	_, err = c.UpdateQuota(ctx, &quotav1.UpdateQuotaRequest{Project: "p", LogicalCloud: "lc", Name: "best-effort", Quota: &quotav1.Quota{
		Metadata: &typesv1.Metadata{Name: "best-effort"}, Spec: specOf(t, map[string]any{"pods": 3}), Scopes: []string{"NotBestEffort"}}})
	require.Equal(t, "quota.scopes", fieldOfErr(t, err))
	_, err = c.UpdateQuota(ctx, &quotav1.UpdateQuotaRequest{Project: "p", LogicalCloud: "lc", Name: "high", Quota: &quotav1.Quota{
		Metadata: &typesv1.Metadata{Name: "high"}, Spec: specOf(t, map[string]any{"hard": map[string]any{"pods": 4},
			"scopeSelector": map[string]any{"matchExpressions": []any{
				map[string]any{"scopeName": "PriorityClass", "operator": "NotIn", "values": []any{"low"}}}}})}})
	require.NoError(t, err)
	rq = renderScoped(t, internal)
	require.Equal(t, "NotIn", rq["high"].Spec.ScopeSelector.MatchExpressions[0].Operator)
	require.Equal(t, map[string]string{"pods": "4", "cpu": "8"}, rq["high"].Spec.Hard)
}

// TestUserQuotasAreSummed: the quotas given for a logical cloud's users
// become one ResourceQuota, users-total, whose hard map is their sum
// (over the default quota), never one ResourceQuota each (Kubernetes
// would hold the namespace to the smallest); each answer says the
// namespace is what it bounds; their sum is held to the installation's
// maximum unless an admin gives it.
func TestUserQuotasAreSummed(t *testing.T) {
	t.Parallel()
	c, internal := quotaService(t, "services=5", "cpu=4")
	ctx := context.Background()
	create := func(ctx context.Context, name, user string, hard map[string]any) (*quotav1.Quota, error) {
		r, err := c.CreateQuota(ctx, &quotav1.CreateQuotaRequest{Project: "p", LogicalCloud: "lc", Quota: &quotav1.Quota{
			Metadata: &typesv1.Metadata{Name: name}, Spec: specOf(t, hard), User: user}})
		return r.GetQuota(), err
	}
	ann, err := create(ctx, "ann-quota", "ann", map[string]any{"cpu": "1", "pods": 10, "memory": "1Gi"})
	require.NoError(t, err)
	require.Equal(t, "ann", ann.GetUser())
	require.Equal(t, "users-total", ann.GetEnforcedBy().GetResourceQuota())
	require.Equal(t, "namespace", ann.GetEnforcedBy().GetLimits())
	require.Contains(t, ann.GetEnforcedBy().GetNote(), "cannot bound one user inside a namespace")
	_, err = create(ctx, "bob-quota", "bob", map[string]any{"cpu": "2", "pods": 5})
	require.NoError(t, err)
	_, err = create(ctx, "shared", "", map[string]any{"pods": 100})
	require.NoError(t, err)

	rq := renderScoped(t, internal)
	require.Equal(t, []string{"shared", "users-total"}, slices.Sorted(maps.Keys(rq)), "no ResourceQuota per user")
	require.Equal(t, map[string]string{"cpu": "3", "pods": "15", "services": "5"}, rq["users-total"].Spec.Hard,
		"the sum of what both users bound; memory, which bob's quota leaves out, stays unbounded as bob's quota leaves it")
	list, err := c.ListQuotas(ctx, &quotav1.ListQuotasRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	for _, q := range list.GetQuotas() {
		want := q.GetMetadata().GetName()
		if q.GetUser() != "" {
			want = "users-total"
		}
		require.Equal(t, want, q.GetEnforcedBy().GetResourceQuota())
	}

	// A user's quota stays its user's on update, and may not move.
	_, err = c.UpdateQuota(ctx, &quotav1.UpdateQuotaRequest{Project: "p", LogicalCloud: "lc", Name: "bob-quota", Quota: &quotav1.Quota{
		Metadata: &typesv1.Metadata{Name: "bob-quota"}, Spec: specOf(t, map[string]any{"cpu": "2", "pods": 6})}})
	require.NoError(t, err)
	require.Equal(t, "16", renderScoped(t, internal)["users-total"].Spec.Hard["pods"])
	_, err = c.UpdateQuota(ctx, &quotav1.UpdateQuotaRequest{Project: "p", LogicalCloud: "lc", Name: "bob-quota", Quota: &quotav1.Quota{
		Metadata: &typesv1.Metadata{Name: "bob-quota"}, Spec: specOf(t, map[string]any{"cpu": "2"}), User: "ann"}})
	require.Equal(t, "quota.user", fieldOfErr(t, err))

	// The sum is what bounds the namespace: a project admin may not take
	// it over the maximum, each figure within it or not; an admin may.
	// In this order: the admin's quota raises the sum.
	for _, c := range []struct {
		role string
		want codes.Code
	}{{pki.RoleProjectAdmin, codes.PermissionDenied}, {pki.RoleAdmin, codes.OK}} {
		role, want := c.role, c.want
		as := metadata.NewOutgoingContext(ctx, server.CallerMD(pki.Identity{Subject: "x", Role: role, Project: "p"}))
		_, err := create(as, "cy-quota-"+role, "cy", map[string]any{"cpu": "2", "pods": 1})
		require.Equal(t, want, status.Code(err), role)
		if err != nil {
			require.Equal(t, "quota.spec.cpu", errs.FieldOf(status.Convert(err)))
			require.Contains(t, status.Convert(err).Message(), "add up to 5 cpu")
		}
	}
}
