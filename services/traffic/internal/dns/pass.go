package dns

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/external-dns/endpoint"
	"sigs.k8s.io/external-dns/pkg/apis/externaldns"
	"sigs.k8s.io/external-dns/plan"
	"sigs.k8s.io/external-dns/provider"
	"sigs.k8s.io/external-dns/provider/rfc2136"
	"sigs.k8s.io/external-dns/registry/txt"
)

// managedTypes are the record types a run manages (external-dns's default).
var managedTypes = []string{endpoint.RecordTypeA, endpoint.RecordTypeAAAA, endpoint.RecordTypeCNAME}

// pass is what external-dns's controller.RunOnce does, for one run: read
// the zone through the TXT registry, read the desired endpoints (the run's
// clusters' DNSEndpoints; none when releasing), plan, apply. The
// controller package itself is not imported: it links every provider
// external-dns has. It answers what the zone then holds for the run's name.
//
// A source that fails fails the pass before anything is planned: an
// unreachable cluster never makes its records look unwanted.
func (c *Controller) pass(ctx context.Context, s *stored, creds map[string]string) ([]string, error) {
	pp, err := parseParams("", fromPairs(s.Params), creds)
	if err != nil {
		return nil, err
	}
	cfg := externaldns.NewConfig()
	cfg.Provider = "rfc2136"
	cfg.RFC2136Host, cfg.RFC2136Port, cfg.RFC2136Zone = pp.hosts, pp.port, pp.zones
	cfg.RFC2136Insecure, cfg.RFC2136TSIGKeyName, cfg.RFC2136TSIGSecret, cfg.RFC2136TSIGSecretAlg =
		pp.insecure, pp.keyName, pp.secret, pp.alg
	// The registry must read the zone to know what the run owns.
	cfg.RFC2136AXFR = true
	cfg.RFC2136MinTTL, cfg.RFC2136BatchChangeSize = pp.minTTL, pp.batch
	cfg.RFC2136LoadBalancingStrategy = "disabled"
	cfg.TXTOwnerID = s.ownerID()
	cfg.ManagedDNSRecordTypes = managedTypes
	domains := endpoint.NewDomainFilter(pp.domains)
	prov, err := rfc2136.New(ctx, cfg, domains)
	if err != nil {
		return nil, fmt.Errorf("rfc2136 provider: %w", err)
	}
	reg, err := txt.New(cfg, prov)
	if err != nil {
		return nil, fmt.Errorf("txt registry: %w", err)
	}

	// A releasing run reads no cluster: nothing is desired.
	src := &runSource{name: s.ExternalName}
	if s.State == stateActive {
		if src, err = c.sources(ctx, s); err != nil {
			return nil, err
		}
	}

	if err := checkTransfer(ctx, pp); err != nil {
		return nil, err
	}
	current, err := reg.Records(ctx)
	if err != nil {
		return nil, fmt.Errorf("read zone: %w", err)
	}
	ctx = context.WithValue(ctx, provider.RecordsContextKey, current)
	desired, err := src.Endpoints(ctx)
	if err != nil {
		return nil, fmt.Errorf("read DNSEndpoints: %w", err)
	}
	if desired, err = reg.AdjustEndpoints(desired); err != nil {
		return nil, fmt.Errorf("adjust endpoints: %w", err)
	}
	p := (&plan.Plan{
		Policies:       []plan.Policy{pp.policy},
		Current:        current,
		Desired:        desired,
		DomainFilter:   endpoint.MatchAllDomainFilters{domains, reg.GetDomainFilter()},
		ManagedRecords: managedTypes,
		OwnerID:        reg.OwnerID(),
	}).Calculate()
	if p.Changes.HasChanges() {
		if err := reg.ApplyChanges(ctx, p.Changes); err != nil {
			return nil, fmt.Errorf("apply changes: %w", err)
		}
	}
	after, err := prov.Records(ctx)
	if err != nil {
		return nil, fmt.Errorf("read zone after changes: %w", err)
	}
	var out []string
	for _, ep := range after {
		if sameName(ep.DNSName, s.ExternalName) && slices.Contains(managedTypes, ep.RecordType) {
			for _, t := range ep.Targets {
				out = append(out, strings.TrimSuffix(ep.DNSName, ".")+" "+ep.RecordType+" "+t)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// sources is one CRD source per cluster of the run (its DNSEndpoints in
// its namespace carrying the run's labels). A cluster that cannot be
// reached fails the pass here, before the zone is planned.
func (c *Controller) sources(ctx context.Context, s *stored) (*runSource, error) {
	sel := labels.SelectorFromSet(fromPairs(s.Selector))
	out := &runSource{name: s.ExternalName}
	for _, cl := range s.Clusters {
		name := cl.Provider + "/" + cl.Cluster
		rc, err := c.connect(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("connect to cluster %s: %w", name, err)
		}
		src, err := newCRDSource(rc, sel, name, cl.Namespace)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", name, err)
		}
		out.clusters = append(out.clusters, src)
	}
	return out, nil
}

// runSource is the run's clusters' endpoints for its name only, merged
// (external-dns's multi-source, then MergeEndpoints): each cluster's
// address for one name becomes one record set, where the plan would
// otherwise pick one cluster's endpoint over the others.
type runSource struct {
	name     string
	clusters []*crdSource
}

// Endpoints fails when any cluster's source fails: a partial answer would
// make the missing clusters' addresses look unwanted.
func (r *runSource) Endpoints(ctx context.Context) ([]*endpoint.Endpoint, error) {
	var all []*endpoint.Endpoint
	for _, c := range r.clusters {
		eps, err := c.Endpoints(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, eps...)
	}
	mine := slices.DeleteFunc(all, func(ep *endpoint.Endpoint) bool { return !sameName(ep.DNSName, r.name) })
	return endpoint.MergeEndpoints(mine), nil
}

func sameName(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}
