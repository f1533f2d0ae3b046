package quota

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/api/resource"

	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/store"
)

// LimitRangeName names the LimitRange a logical cloud's container
// defaults become in its namespace.
const LimitRangeName = "container-defaults"

// Sources of the container defaults GetContainerDefaults answers.
const (
	SourceLogicalCloud = "logical-cloud"
	SourceInstallation = "installation"
)

// The installation's settings the container defaults come from.
const (
	envRequest = "DCM_CONTAINER_DEFAULT_REQUEST"
	envLimit   = "DCM_CONTAINER_DEFAULT_LIMIT"
)

// Defaults are per-container defaults: the requests and the limits a
// LimitRange gives a container that states none (its defaultRequest and
// default), each of cpu and memory only, in canonical form.
type Defaults struct {
	Request, Limit []kube.Amount
}

func (d Defaults) empty() bool { return len(d.Request) == 0 && len(d.Limit) == 0 }

// over lays d over base, resource by resource.
func (d Defaults) over(base Defaults) Defaults {
	return Defaults{Request: kube.MergeHard(base.Request, d.Request), Limit: kube.MergeHard(base.Limit, d.Limit)}
}

// defaultResources are the resources a container default may name.
var defaultResources = []string{"cpu", "memory"}

// ParseDefaults reads the installation's container defaults as
// DCM_CONTAINER_DEFAULT_REQUEST and DCM_CONTAINER_DEFAULT_LIMIT write them
// ("cpu=100m,memory=128Mi").
func ParseDefaults(request, limit string) (Defaults, error) {
	req, err := kube.ParseHardText(envRequest, request)
	if err != nil {
		return Defaults{}, err
	}
	lim, err := kube.ParseHardText(envLimit, limit)
	if err != nil {
		return Defaults{}, err
	}
	d := Defaults{Request: req, Limit: lim}
	if err := checkResources(envRequest, "", req); err != nil {
		return Defaults{}, err
	}
	if err := checkResources(envLimit, "", lim); err != nil {
		return Defaults{}, err
	}
	return d, nil
}

// checkResources refuses a resource other than cpu and memory, and a zero
// quantity. field names the map; sep joins it to a resource (".", or ""
// for a setting, whose errors name the setting alone).
func checkResources(field, sep string, amounts []kube.Amount) error {
	for _, a := range amounts {
		at := field
		if sep != "" {
			at = field + sep + a.Resource
		}
		if !slices.Contains(defaultResources, a.Resource) {
			return errs.Invalid(at, "%q: a container default is cpu or memory only", a.Resource)
		}
		if q := resource.MustParse(a.Quantity); q.Sign() <= 0 {
			return errs.Invalid(at, "%s %s: a container default must be above zero", a.Resource, a.Quantity)
		}
	}
	return nil
}

// parseContainerDefaults checks the API form of container defaults:
// quantities of cpu and memory, above zero. field names the whole
// ("container-defaults").
func parseContainerDefaults(field string, c *quotav1.ContainerDefaults) (Defaults, error) {
	lim, err := kube.ParseHard(field+".default", c.GetDefaultLimit())
	if err != nil {
		return Defaults{}, err
	}
	req, err := kube.ParseHard(field+".default-request", c.GetDefaultRequest())
	if err != nil {
		return Defaults{}, err
	}
	if err := checkResources(field+".default", ".", lim); err != nil {
		return Defaults{}, err
	}
	if err := checkResources(field+".default-request", ".", req); err != nil {
		return Defaults{}, err
	}
	return Defaults{Request: req, Limit: lim}, nil
}

// quantity is the quantity of res in amounts, if any.
func quantity(amounts []kube.Amount, res string) (resource.Quantity, bool) {
	i := slices.IndexFunc(amounts, func(a kube.Amount) bool { return a.Resource == res })
	if i < 0 {
		return resource.Quantity{}, false
	}
	return resource.MustParse(amounts[i].Quantity), true
}

// request is what a container without figures requests of res under d:
// the default request, or else the default limit (Kubernetes takes a
// LimitRange's default as its defaultRequest when that is unset).
func (d Defaults) request(res string) (resource.Quantity, bool) {
	if q, ok := quantity(d.Request, res); ok {
		return q, true
	}
	return quantity(d.Limit, res)
}

// bounds are the quota resources that bound each default: a container
// with the defaults must fit in every quota on its own.
var bounds = []struct {
	limit bool // the default limit (else the request)
	res   string
	hard  []string
}{
	{false, "cpu", []string{"cpu", "requests.cpu"}},
	{false, "memory", []string{"memory", "requests.memory"}},
	{true, "cpu", []string{"limits.cpu"}},
	{true, "memory", []string{"limits.memory"}},
}

// conflict is a default that does not fit.
type conflict struct {
	limit bool   // the default limit (else the request)
	res   string // cpu or memory
	value string // the default
	// quota, hardRes and hard name the quota entry it is above; quota is
	// empty when the request is above the default limit (hard).
	quota, hardRes, hard string
}

// namedHard is a quota as rendered: its name, hard map and scopes.
type namedHard struct {
	name   string
	hard   []kube.Amount
	scopes kube.Scopes
}

// misfit is the first default of d that a container cannot have: a
// request above its limit, or a default above a quota entry that bounds
// it. nil when all fit.
func (d Defaults) misfit(quotas []namedHard) *conflict {
	for _, res := range defaultResources {
		req, rok := quantity(d.Request, res)
		lim, lok := quantity(d.Limit, res)
		if rok && lok && req.Cmp(lim) > 0 {
			return &conflict{res: res, value: req.String(), hard: lim.String()}
		}
	}
	for _, b := range bounds {
		var v resource.Quantity
		var ok bool
		if b.limit {
			v, ok = quantity(d.Limit, b.res)
		} else {
			v, ok = d.request(b.res)
		}
		if !ok {
			continue
		}
		for _, q := range quotas {
			for _, h := range b.hard {
				if hv, ok := quantity(q.hard, h); ok && v.Cmp(hv) > 0 {
					return &conflict{limit: b.limit, res: b.res, value: v.String(), quota: q.name, hardRes: h, hard: hv.String()}
				}
			}
		}
	}
	return nil
}

// what names the default in words.
func (c *conflict) what() string {
	if c.limit {
		return "default " + c.res + " limit"
	}
	return "default " + c.res + " request"
}

// key is the default's field in the API form.
func (c *conflict) key() string {
	if c.limit {
		return "default." + c.res
	}
	return "default-request." + c.res
}

// setting is the installation setting of the default.
func (c *conflict) setting() string {
	if c.limit {
		return envLimit
	}
	return envRequest
}

// defaultsFor reads the container defaults of a logical cloud: its own
// laid over the installation's, and where they come from.
func (s *Service) defaultsFor(ctx context.Context, parent string) (Defaults, string, error) {
	own, err := s.defaults.Get(ctx, parent)
	switch {
	case errs.Code(err) == codes.NotFound:
		return s.containerDefaults, SourceInstallation, nil
	case err != nil:
		return Defaults{}, "", err
	}
	d := Defaults{Request: amounts(own.Msg.GetDefaultRequest()), Limit: amounts(own.Msg.GetDefaultLimit())}
	return d.over(s.containerDefaults), SourceLogicalCloud, nil
}

// rendered is what the quotas of a logical cloud are on its clusters,
// in order: each quota of the logical cloud laid over the base (a scoped
// one over what of the base its scopes can track); the users' quotas
// summed into one, users-total, laid over the base, after them; and when
// every one is scoped, the base alone as "default", which bounds what the
// scopes leave out.
func (s *Service) rendered(qs []*quotav1.StoredQuota) []namedHard {
	out := make([]namedHard, 0, len(qs))
	unscoped := false
	for _, q := range qs {
		if q.GetUser() != "" {
			continue
		}
		sc := scopesOf(q.GetScopes(), q.GetScopeSelector())
		unscoped = unscoped || sc.Empty()
		out = append(out, namedHard{name: q.GetMetadata().GetName(), hard: kube.MergeHard(sc.ForScopes(s.base), amounts(q.GetHard())), scopes: sc})
	}
	if slices.ContainsFunc(qs, func(q *quotav1.StoredQuota) bool { return q.GetUser() != "" }) {
		out = append(out, namedHard{name: UsersTotalName, hard: kube.MergeHard(s.base, usersTotal(qs))})
		unscoped = true
	}
	if !unscoped && len(out) > 0 && len(s.base) > 0 {
		out = append(out, namedHard{name: DefaultName, hard: s.base})
	}
	return out
}

// checkQuotas refuses quotas (the set a logical cloud would have, as
// stored) that leave no room for one container with the logical cloud's
// defaults: the error names field.<quota resource> (field is the quota's
// spec) and says whether the default is the logical cloud's or the
// installation's, so the caller knows to lower it first.
func (s *Service) checkQuotas(ctx context.Context, field, parent string, qs []*quotav1.StoredQuota) error {
	d, source, err := s.defaultsFor(ctx, parent)
	if err != nil {
		return err
	}
	c := d.misfit(s.rendered(qs))
	if c == nil || c.quota == "" {
		return nil
	}
	whose := fmt.Sprintf("the installation's default (%s)", c.setting())
	if source == SourceLogicalCloud {
		whose = "the logical cloud's container default, or the installation's where it sets none (.../container-defaults)"
	}
	return errs.Invalid(join(field, c.hardRes), "%s of quota %q is below the %s %s, %s: a pod without requests or limits could never be admitted; lower the container defaults first (PUT .../container-defaults)",
		c.hard, c.quota, c.what(), c.value, whose)
}

func join(field, name string) string {
	if field == "" {
		return name
	}
	return field + "." + name
}

// api is the API form of container defaults.
func (d Defaults) api(source string) *quotav1.ContainerDefaults {
	return &quotav1.ContainerDefaults{DefaultLimit: kube.HardStruct(d.Limit), DefaultRequest: kube.HardStruct(d.Request), Source: source}
}

// GetContainerDefaults implements quotav1.QuotaServiceServer.
func (s *Service) GetContainerDefaults(ctx context.Context, req *quotav1.GetContainerDefaultsRequest) (*quotav1.GetContainerDefaultsResponse, error) {
	if _, err := s.namespaced(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	d, source, err := s.defaultsFor(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()))
	if err != nil {
		return nil, err
	}
	return &quotav1.GetContainerDefaultsResponse{ContainerDefaults: d.api(source)}, nil
}

// UpdateContainerDefaults implements quotav1.QuotaServiceServer: the
// defaults given, laid over the installation's, must fit one container in
// every quota that applies to the logical cloud (its own, or the default
// one), each request within its limit; else 400 naming the default.
func (s *Service) UpdateContainerDefaults(ctx context.Context, req *quotav1.UpdateContainerDefaultsRequest) (*quotav1.UpdateContainerDefaultsResponse, error) {
	const field = "container-defaults"
	own, err := parseContainerDefaults(field, req.GetContainerDefaults())
	if err != nil {
		return nil, err
	}
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.namespaced(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	parent := store.Key(project, lc)
	qs, err := s.effective(ctx, c.GetLevel(), parent)
	if err != nil {
		return nil, err
	}
	d := own.over(s.containerDefaults)
	if m := d.misfit(s.rendered(qs)); m != nil {
		whose := ""
		if !slices.ContainsFunc(own.Limit, func(a kube.Amount) bool { return m.limit && a.Resource == m.res }) &&
			!slices.ContainsFunc(own.Request, func(a kube.Amount) bool { return !m.limit && a.Resource == m.res }) {
			whose = fmt.Sprintf(" (the installation's, %s: set it here)", m.setting())
		}
		if m.quota == "" {
			limitWhose := ""
			if !slices.ContainsFunc(own.Limit, func(a kube.Amount) bool { return a.Resource == m.res }) {
				limitWhose = fmt.Sprintf(" (the installation's, %s: set default.%s too)", envLimit, m.res)
			}
			return nil, errs.Invalid(join(field, m.key()), "%s is above the default %s limit %s%s: a request may not exceed its limit", m.value, m.res, m.hard, limitWhose)
		}
		return nil, errs.Invalid(join(field, m.key()), "%s%s is above %s %s of quota %q: a container with the defaults would not fit in the logical cloud's quota",
			m.value, whose, m.hardRes, m.hard, m.quota)
	}
	stored := &quotav1.StoredContainerDefaults{}
	for _, a := range own.Limit {
		stored.DefaultLimit = append(stored.DefaultLimit, &quotav1.ResourceAmount{Resource: a.Resource, Quantity: a.Quantity})
	}
	for _, a := range own.Request {
		stored.DefaultRequest = append(stored.DefaultRequest, &quotav1.ResourceAmount{Resource: a.Resource, Quantity: a.Quantity})
	}
	modify := func() error {
		_, err := s.defaults.Modify(ctx, parent, func(cur *quotav1.StoredContainerDefaults) error {
			cur.DefaultLimit, cur.DefaultRequest = stored.GetDefaultLimit(), stored.GetDefaultRequest()
			return nil
		})
		return err
	}
	err = modify()
	if errs.Code(err) == codes.NotFound {
		err = s.defaults.CreateChecked(ctx, parent, parent, stored, s.exists(project, lc))
		if errs.Code(err) == codes.AlreadyExists {
			err = modify() // a concurrent PUT created it: this one wins, as a PUT
		}
	}
	if err != nil {
		return nil, err
	}
	return &quotav1.UpdateContainerDefaultsResponse{ContainerDefaults: d.api(SourceLogicalCloud)}, nil
}

// DeleteContainerDefaults implements quotav1.QuotaServiceServer: the
// installation's defaults apply again, which must fit the logical cloud's
// quotas too (FailedPrecondition otherwise: lower them first).
func (s *Service) DeleteContainerDefaults(ctx context.Context, req *quotav1.DeleteContainerDefaultsRequest) (*quotav1.DeleteContainerDefaultsResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.namespaced(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	parent := store.Key(project, lc)
	qs, err := s.effective(ctx, c.GetLevel(), parent)
	if err != nil {
		return nil, err
	}
	if m := s.containerDefaults.misfit(s.rendered(qs)); m != nil && m.quota != "" {
		return nil, errs.FailedPrecondition("the installation's %s %s (%s) is above %s %s of quota %q: without its own container defaults the logical cloud's pods without figures could never be admitted; lower the quota's figure first or keep the logical cloud's own defaults",
			m.what(), m.value, m.setting(), m.hardRes, m.hard, m.quota)
	}
	if err := s.defaults.Delete(ctx, parent); err != nil {
		return nil, err
	}
	return &quotav1.DeleteContainerDefaultsResponse{}, nil
}

// limitRange renders container defaults as the logical cloud's
// LimitRange, or "" when there are none.
func limitRange(namespace string, labels map[string]string, d Defaults) string {
	if d.empty() {
		return ""
	}
	item := map[string]any{"type": "Container"}
	if len(d.Limit) > 0 {
		item["default"] = amountMap(d.Limit)
	}
	if len(d.Request) > 0 {
		item["defaultRequest"] = amountMap(d.Request)
	}
	return kube.Manifest("v1", "LimitRange", kube.Meta{Name: LimitRangeName, Namespace: namespace, Labels: labels},
		map[string]any{"spec": map[string]any{"limits": []any{item}}})
}

func amountMap(amounts []kube.Amount) map[string]string {
	out := make(map[string]string, len(amounts))
	for _, a := range amounts {
		out[a.Resource] = a.Quantity
	}
	return out
}
