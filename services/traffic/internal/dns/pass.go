package dns

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"time"

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
	params := fromPairs(s.Params)
	pp, err := parseParams("", params, creds)
	if err != nil {
		return nil, err
	}
	// The project's allow-list as it is now, before anything is dialed:
	// an admin who narrowed it stops the runs it no longer admits.
	al, err := c.allow.Of(ctx, s.project())
	if err != nil {
		return nil, err
	}
	if err := al.Check("", s.ExternalName, params); err != nil {
		return nil, because(nil, "%s", strings.TrimPrefix(err.Error(), "externalDnsParameters."))
	}
	// The addresses checked are the ones dialed: external-dns gets them,
	// not the names, so a name cannot resolve elsewhere in between.
	if pp.hosts, err = c.dialable(ctx, al, pp.hosts); err != nil {
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
		return nil, because(err, "the rfc2136 provider could not be set up")
	}
	reg, err := txt.New(cfg, prov)
	if err != nil {
		return nil, because(err, "the TXT registry could not be set up")
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
		return nil, because(err, "the zone could not be read from its DNS server")
	}
	ctx = context.WithValue(ctx, provider.RecordsContextKey, current)
	desired, err := src.Endpoints(ctx)
	if err != nil {
		return nil, because(err, "the clusters' DNSEndpoints could not be read")
	}
	if desired, err = reg.AdjustEndpoints(desired); err != nil {
		return nil, because(err, "the DNSEndpoints could not be planned")
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
			return nil, because(err, "the DNS server did not apply the changes")
		}
	}
	after, err := prov.Records(ctx)
	if err != nil {
		return nil, because(err, "the zone could not be read after the changes")
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
			return nil, because(err, "cluster %s could not be reached", name)
		}
		src, err := newCRDSource(rc, sel, name, cl.Namespace)
		if err != nil {
			return nil, because(err, "cluster %s could not be read", name)
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

// dialable are the addresses of a run's rfc2136 hosts that it may dial:
// a host given as an address is one, a host name is looked up now. Every
// address must be public or in the allow-list's networks (literal server
// addresses are), else the pass fails naming the host and what kind of
// address it is, having dialed nothing.
func (c *Controller) dialable(ctx context.Context, al *AllowList, hosts []string) ([]string, error) {
	var out []string
	for _, h := range hosts {
		var addrs []netip.Addr
		if a, err := netip.ParseAddr(h); err == nil {
			addrs = []netip.Addr{a}
		} else {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			addrs, err = c.resolve(rctx, h)
			cancel()
			if err != nil || len(addrs) == 0 {
				return nil, because(err, "rfc2136-host %s could not be resolved", h)
			}
		}
		for _, a := range addrs {
			if !al.Admits(a) {
				kind := nonPublic(a)
				if kind == "" {
					kind = "an address DCM never dials"
				}
				return nil, because(nil, "rfc2136-host %s is (or resolves to) %s outside the networks of project %q's DNS allow-list: not dialed", h, kind, al.Project)
			}
			out = append(out, a.Unmap().String())
		}
	}
	return out, nil
}
