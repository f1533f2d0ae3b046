package render

import (
	"net/netip"
	"strings"

	"github.com/dcm-project/dcm/platform/errs"
)

// Render makes the group's objects per cluster (in Input order, only
// clusters with objects; each cluster's in apply order) and the runs of
// its DNS provider entries, as docs/traffic.md maps them. It reads
// nothing but in: the same Input gives byte-identical manifests. An
// intent naming a cluster, label or resource the logical cloud or group
// does not have is InvalidArgument naming the intent and field; a cluster
// without the address an intent needs is FailedPrecondition naming it.
func Render(in Input) ([]ClusterManifests, []DNSRun, error) {
	for _, f := range []struct{ field, value string }{
		{"project", in.Project}, {"group", in.Group}, {"logical_cloud", in.LogicalCloud},
		{"namespace", in.Namespace}, {"istio_namespace", in.IstioNamespace},
	} {
		if f.value == "" {
			return nil, nil, errs.Invalid(f.field, "required")
		}
	}
	if err := checkLabel("group", in.Group); err != nil {
		return nil, nil, err
	}
	if err := checkLabel("namespace", in.Namespace); err != nil {
		return nil, nil, err
	}
	if err := checkLabel("istio_namespace", in.IstioNamespace); err != nil {
		return nil, nil, err
	}
	for _, t := range in.Clusters {
		if err := checkAddress(t); err != nil {
			return nil, nil, err
		}
	}
	b := newBuilder(in)
	// External inbound resources first: DNS provider entries refer to
	// them, and their external names are the inbound hosts too.
	inbound, ids, err := b.resolveInbound(in.Inbound)
	if err != nil {
		return nil, nil, err
	}
	published := map[string]string{}
	for _, it := range in.DNS {
		if err := b.dnsIntent(it, ids, published); err != nil {
			return nil, nil, err
		}
	}
	// The order decides which intent a shared object (one per host) is
	// named after: intercluster, intracluster, outbound, inbound.
	for _, it := range in.Intercluster {
		if err := b.intercluster(it); err != nil {
			return nil, nil, err
		}
	}
	for _, it := range in.Intracluster {
		if err := b.intracluster(it); err != nil {
			return nil, nil, err
		}
	}
	for _, it := range in.Outbound {
		if err := b.outbound(it); err != nil {
			return nil, nil, err
		}
	}
	for _, it := range inbound {
		if err := b.inbound(it); err != nil {
			return nil, nil, err
		}
	}
	for _, finish := range []func() error{b.serviceEntries, b.destRules, b.egressObjects} {
		if err := finish(); err != nil {
			return nil, nil, err
		}
	}
	b.groupObjects()
	b.dnsReaders()
	return b.manifests(), b.runs, nil
}

// checkAddress refuses a cluster address that is neither a plain IP
// address (netip, no IPv6 zone: a zone's text is free) nor a DNS name:
// the address is written into ServiceEntries and DNSEndpoints as is.
func checkAddress(t Target) error {
	if t.Address == "" {
		return nil
	}
	if a, err := netip.ParseAddr(t.Address); err == nil {
		if a.Zone() != "" {
			return errs.Invalid("loadbalancer-ip", "cluster %s/%s: %q carries an IPv6 zone: give the address without %%zone", t.Provider, t.Cluster, t.Address)
		}
		return nil
	}
	if strings.Contains(t.Address, "%") || checkHost("loadbalancer-ip", t.Address) != nil {
		return errs.Invalid("loadbalancer-ip", "cluster %s/%s: %q is neither an IP address nor a DNS name", t.Provider, t.Cluster, t.Address)
	}
	return nil
}
