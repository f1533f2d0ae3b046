// Package quota implements the quota service: the cluster quotas of each
// logical cloud, checked with Kubernetes' own rules for resource names and
// quantities, the default quota of a logical cloud that has none, the
// container defaults of each logical cloud (defaults.go), and the
// ResourceQuota and LimitRange objects applying a logical cloud puts on
// its clusters. It never calls core: core tells it the facts of every
// logical cloud (PutLogicalCloudFacts, platform/facts), and it checks
// against its copy that a logical cloud exists before it stores or answers
// anything under it on its public API; its internal API (render, purge)
// takes the namespace and level from core's request. It does not talk to
// clusters.
package quota

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/util/validation"

	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// DefaultName is the name the default quota is shown under.
const DefaultName = "default"

// UsersTotalName names the one ResourceQuota the quotas of a logical
// cloud's users become (kube.UsersTotalName).
const UsersTotalName = kube.UsersTotalName

// LimitsNamespace is what every rendered ResourceQuota bounds.
const LimitsNamespace = "namespace"

// userNote says what a user's quota is on the clusters.
const userNote = "Kubernetes cannot bound one user inside a namespace: this user's figures are added to the other users' quotas into ResourceQuota " +
	UsersTotalName + ", which bounds the whole namespace (all users together), not this user alone"

// Service is the quota service's gRPC API.
type Service struct {
	quotav1.UnimplementedQuotaServiceServer
	quotav1.UnimplementedQuotaInternalServiceServer
	quotas   *store.Records[*quotav1.StoredQuota]
	defaults *store.Records[*quotav1.StoredContainerDefaults]
	// facts are the logical clouds as core told them (PutLogicalCloudFacts).
	facts        *facts.Facts
	defaultQuota []kube.Amount
	maxQuota     []kube.Amount
	// base is what every rendered quota has unless it sets more or less:
	// the default quota, over the maximum.
	base []kube.Amount
	// containerDefaults are the installation's container defaults
	// (possibly empty: no LimitRange for a logical cloud without its own).
	containerDefaults Defaults
}

// New opens the service's collections on st, its copy of the logical
// clouds' facts among them; defaultQuota (possibly empty: none) applies to a
// logical cloud without a quota of its own, and is what every quota of
// its own is laid over; maxQuota (possibly empty) is what only an admin
// may set more than; containers (possibly empty) are the installation's
// container defaults (ParseDefaults). A default above the maximum is
// refused, and so are container defaults that do not fit one container in
// the default quota (over the maximum) or a request above its limit.
func New(st *store.Store, defaultQuota, maxQuota []kube.Amount, containers Defaults) (*Service, error) {
	if err := kube.CheckMax("DCM_DEFAULT_QUOTA", defaultQuota, maxQuota, false); err != nil {
		return nil, fmt.Errorf("the default quota must be within DCM_MAX_QUOTA: %w", err)
	}
	base := kube.MergeHard(maxQuota, defaultQuota)
	if c := containers.misfit([]namedHard{{name: DefaultName, hard: base}}); c != nil {
		if c.quota == "" {
			return nil, fmt.Errorf("%s: default %s request %s is above the default %s limit %s (%s)", envRequest, c.res, c.value, c.res, c.hard, envLimit)
		}
		return nil, fmt.Errorf("%s: %s %s is above %s %s of the default quota (DCM_DEFAULT_QUOTA over DCM_MAX_QUOTA): a pod without figures could never be admitted",
			c.setting(), c.what(), c.value, c.hardRes, c.hard)
	}
	return &Service{
		quotas: store.NewRecords(st, QuotasCollection, "quota", func() *quotav1.StoredQuota { return &quotav1.StoredQuota{} }),
		defaults: store.NewRecords(st, ContainerDefaultsCollection, "container defaults",
			func() *quotav1.StoredContainerDefaults { return &quotav1.StoredContainerDefaults{} }),
		facts:             facts.Open(st, "quota"),
		defaultQuota:      defaultQuota,
		maxQuota:          maxQuota,
		base:              base,
		containerDefaults: containers,
	}, nil
}

// Register serves the public and the internal API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	quotav1.RegisterQuotaServiceServer(r, s)
	quotav1.RegisterQuotaInternalServiceServer(r, s)
}

// cloud reads the facts core told of the logical cloud: NotFound if the
// service has none or it is being deleted.
func (s *Service) cloud(ctx context.Context, project, lc string) (*typesv1.LogicalCloudFacts, error) {
	return s.facts.Parent(ctx, project, lc)
}

// Facts is the service's copy of the logical clouds' facts, which core
// tells it through the facts contract (platform/facts.Serve).
func (s *Service) Facts() *facts.Facts { return s.facts }

// namespaced reads a logical cloud that has a namespace to put quotas in:
// FailedPrecondition for an admin one, which has none.
func (s *Service) namespaced(ctx context.Context, project, lc string) (*typesv1.LogicalCloudFacts, error) {
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	if c.GetLevel() == kube.LevelAdmin {
		return nil, errs.FailedPrecondition("logical cloud %q is an admin logical cloud: it has no namespace to put a quota in", lc)
	}
	return c, nil
}

// exists is cloud as a CreateChecked check.
func (s *Service) exists(project, lc string) func(context.Context) error {
	return s.facts.Check(project, lc)
}

// stored checks a quota (its hard map and scopes with Kubernetes' rules,
// given in the project's form or as Kubernetes' ResourceQuotaSpec in
// spec), and that only an admin goes over the maximum, and returns its
// stored form.
func (s *Service) stored(ctx context.Context, q *quotav1.Quota) (*quotav1.StoredQuota, error) {
	hard, sc, k8s, err := kube.ParseQuotaSpec("quota.spec", q.GetSpec())
	if err != nil {
		return nil, err
	}
	switch {
	case k8s && (len(q.GetScopes()) > 0 || q.GetScopeSelector() != nil):
		return nil, errs.Invalid("quota.scopes", "spec is a ResourceQuotaSpec with its own scopes and scopeSelector: give the scopes there or here, not both")
	case !k8s:
		sc = scopesOf(q.GetScopes(), q.GetScopeSelector())
		if err := kube.CheckScopes("quota", kube.APIScopeFields, hard, sc); err != nil {
			return nil, err
		}
	}
	if err := kube.CheckMax("quota.spec", hard, s.maxQuota, server.MayGrant(ctx)); err != nil {
		return nil, err
	}
	name := q.GetMetadata().GetName()
	if name == UsersTotalName {
		return nil, errs.Invalid("quota.metadata.name", "%q is the ResourceQuota the users' quotas are summed into: choose another name", name)
	}
	if u := q.GetUser(); u != "" {
		if msgs := validation.IsDNS1123Label(u); len(msgs) > 0 {
			return nil, errs.Invalid("quota.user", "%q is not a user name: %s", u, strings.Join(msgs, "; "))
		}
		if !sc.Empty() {
			return nil, errs.Invalid("quota.scopes", "a user's quota is summed with the other users' into one ResourceQuota (%s), which has no scopes: give scoped quotas to the logical cloud (without user)", UsersTotalName)
		}
	}
	if name == DefaultName && !sc.Empty() {
		return nil, errs.Invalid("quota.metadata.name", "%q is where the default quota bounds what scoped quotas leave out: a scoped quota needs another name", name)
	}
	out := &quotav1.StoredQuota{Metadata: q.GetMetadata(), Scopes: sc.Scopes, User: q.GetUser()}
	if sc.Selector != nil {
		out.ScopeSelector = &quotav1.ScopeSelector{MatchExpressions: []*quotav1.ScopeRequirement{}}
		for _, r := range *sc.Selector {
			out.ScopeSelector.MatchExpressions = append(out.ScopeSelector.MatchExpressions,
				&quotav1.ScopeRequirement{ScopeName: r.ScopeName, Operator: r.Operator, Values: r.Values})
		}
	}
	for _, a := range hard {
		out.Hard = append(out.Hard, &quotav1.ResourceAmount{Resource: a.Resource, Quantity: a.Quantity})
	}
	return out, nil
}

// scopesOf reads the scopes of a quota.
func scopesOf(scopes []string, sel *quotav1.ScopeSelector) kube.Scopes {
	out := kube.Scopes{Scopes: scopes}
	if sel != nil {
		reqs := make([]kube.ScopeRequirement, 0, len(sel.GetMatchExpressions()))
		for _, r := range sel.GetMatchExpressions() {
			reqs = append(reqs, kube.ScopeRequirement{ScopeName: r.GetScopeName(), Operator: r.GetOperator(), Values: r.GetValues()})
		}
		out.Selector = &reqs
	}
	return out
}

// api is the API form of a stored quota.
func api(q *quotav1.StoredQuota) *quotav1.Quota {
	out := &quotav1.Quota{Metadata: q.GetMetadata(), Spec: kube.HardStruct(amounts(q.GetHard())),
		Scopes: q.GetScopes(), ScopeSelector: q.GetScopeSelector(), User: q.GetUser(),
		EnforcedBy: &quotav1.Enforcement{ResourceQuota: q.GetMetadata().GetName(), Limits: LimitsNamespace}}
	if q.GetUser() != "" {
		out.EnforcedBy.ResourceQuota, out.EnforcedBy.Note = UsersTotalName, userNote
	}
	return out
}

// checkUsersTotal refuses, unless the caller may grant more, users'
// quotas (the set a logical cloud would have) whose sum, the namespace's
// users-total quota, is above the installation's maximum.
func (s *Service) checkUsersTotal(ctx context.Context, qs []*quotav1.StoredQuota) error {
	return kube.CheckUsersTotal("quota.spec", usersTotal(qs), s.maxQuota, server.MayGrant(ctx))
}

// usersTotal is the users' quotas among qs summed (kube.SumHard).
func usersTotal(qs []*quotav1.StoredQuota) []kube.Amount {
	var users [][]kube.Amount
	for _, q := range qs {
		if q.GetUser() != "" {
			users = append(users, amounts(q.GetHard()))
		}
	}
	return kube.SumHard(users)
}

// defaultFor is the default quota as shown for a logical cloud, or nil if
// none applies (one of its own exists, no default is configured, or it is
// an admin logical cloud, which has no namespace).
func (s *Service) defaultFor(ctx context.Context, level, parent string) (*quotav1.StoredQuota, error) {
	if len(s.defaultQuota) == 0 || level == kube.LevelAdmin {
		return nil, nil
	}
	own, err := s.quotas.List(ctx, parent)
	if err != nil || len(own) > 0 {
		return nil, err
	}
	q := &quotav1.StoredQuota{Metadata: &typesv1.Metadata{
		Name:        DefaultName,
		Description: "the default quota: applies while the logical cloud has no quota of its own (DCM_DEFAULT_QUOTA)",
	}}
	for _, a := range s.defaultQuota {
		q.Hard = append(q.Hard, &quotav1.ResourceAmount{Resource: a.Resource, Quantity: a.Quantity})
	}
	return q, nil
}

// CreateQuota implements quotav1.QuotaServiceServer.
func (s *Service) CreateQuota(ctx context.Context, req *quotav1.CreateQuotaRequest) (*quotav1.CreateQuotaResponse, error) {
	q, err := s.stored(ctx, req.GetQuota())
	if err != nil {
		return nil, err
	}
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if _, err := s.namespaced(ctx, project, lc); err != nil {
		return nil, err
	}
	parent := store.Key(project, lc)
	own, err := s.quotas.List(ctx, parent)
	if err != nil {
		return nil, err
	}
	if err := s.checkQuotas(ctx, "quota.spec", parent, append(own, q)); err != nil {
		return nil, err
	}
	if err := s.checkUsersTotal(ctx, append(own, q)); err != nil {
		return nil, err
	}
	err = s.quotas.CreateChecked(ctx, store.Key(parent, q.GetMetadata().GetName()), parent, q, s.exists(project, lc))
	if err != nil {
		return nil, err
	}
	return &quotav1.CreateQuotaResponse{Quota: api(q)}, nil
}

// GetQuota implements quotav1.QuotaServiceServer.
func (s *Service) GetQuota(ctx context.Context, req *quotav1.GetQuotaRequest) (*quotav1.GetQuotaResponse, error) {
	c, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	parent := store.Key(req.GetProject(), req.GetLogicalCloud())
	q, err := s.quotas.Get(ctx, store.Key(parent, req.GetName()))
	if err == nil {
		return &quotav1.GetQuotaResponse{Quota: api(q.Msg)}, nil
	}
	if errs.Code(err) != codes.NotFound || req.GetName() != DefaultName {
		return nil, err
	}
	d, derr := s.defaultFor(ctx, c.GetLevel(), parent)
	switch {
	case derr != nil:
		return nil, derr
	case d == nil:
		return nil, err
	}
	return &quotav1.GetQuotaResponse{Quota: api(d)}, nil
}

// effective reads the quotas that apply to a logical cloud: its own,
// ordered by name, or else the default one.
func (s *Service) effective(ctx context.Context, level, parent string) ([]*quotav1.StoredQuota, error) {
	qs, err := s.quotas.List(ctx, parent)
	if err != nil || len(qs) > 0 {
		return qs, err
	}
	d, err := s.defaultFor(ctx, level, parent)
	if err != nil || d == nil {
		return qs, err
	}
	return []*quotav1.StoredQuota{d}, nil
}

// ListQuotas implements quotav1.QuotaServiceServer.
func (s *Service) ListQuotas(ctx context.Context, req *quotav1.ListQuotasRequest) (*quotav1.ListQuotasResponse, error) {
	c, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	// A page of the logical cloud's own quotas; the default one stands in
	// for them on the first page when there are none (as effective).
	parent := store.Key(req.GetProject(), req.GetLogicalCloud())
	qs, next, err := s.quotas.ListPage(ctx, parent, store.PageOf(req))
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 && req.GetPageToken() == "" {
		d, err := s.defaultFor(ctx, c.GetLevel(), parent)
		if err != nil {
			return nil, err
		}
		if d != nil {
			qs = append(qs, d)
		}
	}
	out := &quotav1.ListQuotasResponse{Quotas: make([]*quotav1.Quota, 0, len(qs)), NextPageToken: next}
	for _, q := range qs {
		out.Quotas = append(out.Quotas, api(q))
	}
	return out, nil
}

// UpdateQuota implements quotav1.QuotaServiceServer. Updating the default
// quota of a logical cloud stores it as that logical cloud's own.
func (s *Service) UpdateQuota(ctx context.Context, req *quotav1.UpdateQuotaRequest) (*quotav1.UpdateQuotaResponse, error) {
	if n := req.GetQuota().GetMetadata().GetName(); n != req.GetName() {
		return nil, errs.Invalid("quota.metadata.name", "must equal the quota in the path (%q), got %q", req.GetName(), n)
	}
	q, err := s.stored(ctx, req.GetQuota())
	if err != nil {
		return nil, err
	}
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	parent := store.Key(project, lc)
	id := store.Key(parent, req.GetName())
	own, err := s.quotas.List(ctx, parent)
	if err != nil {
		return nil, err
	}
	if i := slices.IndexFunc(own, func(o *quotav1.StoredQuota) bool { return o.GetMetadata().GetName() == req.GetName() }); i >= 0 {
		if err := keepUserAndScopes(req.GetQuota(), own[i], q); err != nil {
			return nil, err
		}
	}
	after := slices.DeleteFunc(own, func(o *quotav1.StoredQuota) bool { return o.GetMetadata().GetName() == req.GetName() })
	if err := s.checkQuotas(ctx, "quota.spec", parent, append(after, q)); err != nil {
		return nil, err
	}
	if err := s.checkUsersTotal(ctx, append(after, q)); err != nil {
		return nil, err
	}
	_, err = s.quotas.Modify(ctx, id, func(cur *quotav1.StoredQuota) error {
		if err := keepUserAndScopes(req.GetQuota(), cur, q); err != nil {
			return err
		}
		cur.Metadata, cur.Hard, cur.Scopes, cur.ScopeSelector, cur.User = q.GetMetadata(), q.GetHard(), q.GetScopes(), q.GetScopeSelector(), q.GetUser()
		return nil
	})
	if errs.Code(err) == codes.NotFound && req.GetName() == DefaultName {
		d, derr := s.defaultFor(ctx, c.GetLevel(), parent)
		if derr != nil {
			return nil, derr
		}
		if d != nil {
			err = s.quotas.CreateChecked(ctx, id, parent, q, s.exists(project, lc))
		}
	}
	if err != nil {
		return nil, err
	}
	return &quotav1.UpdateQuotaResponse{Quota: api(q)}, nil
}

// keepUserAndScopes checks a quota's update (given, stored as q) against
// what is stored (cur): a quota given without user stays its user's; its
// user cannot change; nor can its scopes, which Kubernetes keeps for the
// life of a ResourceQuota (its scopeSelector may change).
func keepUserAndScopes(given *quotav1.Quota, cur, q *quotav1.StoredQuota) error {
	switch u := q.GetUser(); {
	case u == "":
		q.User = cur.GetUser()
	case u != cur.GetUser():
		return errs.Invalid("quota.user", "a quota's user cannot change (%q to %q): delete the quota and create it again", cur.GetUser(), u)
	}
	if !sameSet(cur.GetScopes(), q.GetScopes()) {
		field := "quota.scopes"
		if given.GetSpec().GetFields()["hard"].GetStructValue() != nil {
			field = "quota.spec.scopes"
		}
		return errs.Invalid(field, "Kubernetes does not let a ResourceQuota's scopes change (%v to %v): delete the quota and create it again", cur.GetScopes(), q.GetScopes())
	}
	return nil
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// DeleteQuota implements quotav1.QuotaServiceServer.
func (s *Service) DeleteQuota(ctx context.Context, req *quotav1.DeleteQuotaRequest) (*quotav1.DeleteQuotaResponse, error) {
	c, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	parent := store.Key(req.GetProject(), req.GetLogicalCloud())
	if err := s.checkLastQuota(ctx, c.GetLevel(), parent, req.GetName()); err != nil {
		return nil, err
	}
	err = s.quotas.Delete(ctx, store.Key(parent, req.GetName()))
	if errs.Code(err) == codes.NotFound && req.GetName() == DefaultName {
		if d, derr := s.defaultFor(ctx, c.GetLevel(), parent); derr != nil || d != nil {
			return nil, errors.Join(derr, errs.FailedPrecondition("the default quota applies while the logical cloud has no quota of its own; add one to replace it"))
		}
	}
	if err != nil {
		return nil, err
	}
	return &quotav1.DeleteQuotaResponse{}, nil
}

// RenderQuotas implements quotav1.QuotaInternalServiceServer: the quotas
// ListQuotas shows, each a ResourceQuota of the same name in the logical
// cloud's namespace, laid over the default quota (and the maximum, for
// resources the default does not set): a quota that leaves a resource
// out, or is empty, still bounds it on a shared cluster. Then the
// LimitRange "container-defaults" with the logical cloud's container
// defaults (its own over the installation's), when there are any. The namespace and
// level are core's, sent in the request: it never calls core.
func (s *Service) RenderQuotas(ctx context.Context, req *quotav1.RenderQuotasRequest) (*quotav1.RenderQuotasResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if req.GetLevel() == kube.LevelAdmin || req.GetNamespace() == "" {
		return nil, errs.FailedPrecondition("logical cloud %q is an admin logical cloud: it has no namespace to put a quota in", lc)
	}
	// Core checked the name when it stored the logical cloud; a request
	// that did not come from there gets a clear refusal, not quotas every
	// cluster refuses on every apply.
	ns := req.GetNamespace()
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return nil, errs.Invalid("namespace", "%q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
	}
	qs, err := s.effective(ctx, req.GetLevel(), store.Key(project, lc))
	if err != nil {
		return nil, err
	}
	d, source, err := s.defaultsFor(ctx, store.Key(project, lc))
	if err != nil {
		return nil, err
	}
	// The logical cloud's own defaults were checked against the
	// installation's when stored; a later change of the installation's
	// can leave a request above its limit, a LimitRange every cluster
	// refuses: say so here, not as a failed apply on each cluster.
	if c := d.misfit(nil); c != nil && source == SourceLogicalCloud {
		return nil, errs.FailedPrecondition("the logical cloud's container defaults: default %s request %s is above the default %s limit %s (the installation's %s changed since they were set): fix them at .../container-defaults",
			c.res, c.value, c.res, c.hard, envLimit)
	}
	out := &quotav1.RenderQuotasResponse{Namespace: ns, Manifests: []string{}, Names: []string{}}
	for _, q := range s.rendered(qs) {
		out.Manifests = append(out.Manifests, resourceQuota(q, ns, kube.Labels(project, lc)))
		out.Names = append(out.Names, q.name)
	}
	if m := limitRange(ns, kube.Labels(project, lc), d); m != "" {
		out.Manifests = append(out.Manifests, m)
		out.Names = append(out.Names, LimitRangeName)
	}
	return out, nil
}

func amounts(hard []*quotav1.ResourceAmount) []kube.Amount {
	out := make([]kube.Amount, 0, len(hard))
	for _, a := range hard {
		out = append(out, kube.Amount{Resource: a.GetResource(), Quantity: a.GetQuantity()})
	}
	return out
}

// resourceQuota renders a quota as a ResourceQuota object.
func resourceQuota(q namedHard, namespace string, labels map[string]string) string {
	spec := map[string]any{"hard": amountMap(q.hard)}
	if len(q.scopes.Scopes) > 0 {
		spec["scopes"] = q.scopes.Scopes
	}
	if sel := q.scopes.Selector; sel != nil {
		exprs := make([]any, 0, len(*sel))
		for _, r := range *sel {
			e := map[string]any{"scopeName": r.ScopeName, "operator": r.Operator}
			if len(r.Values) > 0 {
				e["values"] = r.Values
			}
			exprs = append(exprs, e)
		}
		spec["scopeSelector"] = map[string]any{"matchExpressions": exprs}
	}
	return kube.Manifest("v1", "ResourceQuota", kube.Meta{Name: q.name, Namespace: namespace, Labels: labels},
		map[string]any{"spec": spec})
}

// PurgeLogicalCloud implements quotav1.QuotaInternalServiceServer.
func (s *Service) PurgeLogicalCloud(ctx context.Context, req *quotav1.PurgeLogicalCloudRequest) (*quotav1.PurgeLogicalCloudResponse, error) {
	parent := store.Key(req.GetProject(), req.GetLogicalCloud())
	n, err := s.quotas.DeleteUnder(ctx, parent)
	if err != nil {
		return nil, err
	}
	m, err := s.defaults.DeleteUnder(ctx, parent)
	if err != nil {
		return nil, err
	}
	return &quotav1.PurgeLogicalCloudResponse{Removed: n + m}, nil
}

// checkLastQuota refuses to delete the logical cloud's last quota of its
// own when the default quota that would apply again leaves no room for
// one container with the logical cloud's container defaults.
func (s *Service) checkLastQuota(ctx context.Context, level, parent, name string) error {
	own, err := s.quotas.List(ctx, parent)
	if err != nil || len(own) != 1 || own[0].GetMetadata().GetName() != name || len(s.defaultQuota) == 0 || level == kube.LevelAdmin {
		return err
	}
	d, _, err := s.defaultsFor(ctx, parent)
	if err != nil {
		return err
	}
	if c := d.misfit([]namedHard{{name: DefaultName, hard: s.base}}); c != nil && c.quota != "" {
		return errs.FailedPrecondition("without quota %q the default quota applies again, and its %s %s is below the logical cloud's %s %s: lower the container defaults first (PUT .../container-defaults)",
			name, c.hardRes, c.hard, c.what(), c.value)
	}
	return nil
}
