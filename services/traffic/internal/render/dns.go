package render

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
)

// Providers are the external-dns providers DNS provider entries may use.
var Providers = []string{"rfc2136"}

// dnsIntent renders a DNS provider intent: each entry publishes its
// externalName for the external inbound resource with its id, from each
// cluster running that resource's Service and carrying every label of its
// cluster-selector, as a DNSEndpoint (A or AAAA record of the cluster's
// loadbalancer-ip, where the ingress gateway listens) that the entry's
// external-dns run reads (docs/traffic.md "External DNS").
func (b *builder) dnsIntent(it *trafficv1.DnsProviderIntent, inbound map[string]inboundRef, published map[string]string) error {
	name := it.GetName()
	if name == "" && len(it.GetDnsProvider()) > 0 {
		name = it.GetDnsProvider()[0].GetId()
	}
	w := whereOf(KindDNS, name)
	if err := checkLabel(w.field("name"), name); err != nil {
		return err
	}
	if len(it.GetDnsProvider()) == 0 {
		return errs.Invalid(w.field("dnsProvider"), "the intent publishes no name")
	}
	o := owner{name, KindDNS}
	seen := map[string]int{}
	for i, e := range it.GetDnsProvider() {
		path := fmt.Sprintf("dnsProvider[%d].", i)
		id := e.GetId()
		ref, ok := inbound[id]
		if !ok {
			return errs.Invalid(w.field("%sid", path), "no external inbound resource of group %s has id %q", b.in.Group, id)
		}
		if j, dup := seen[id]; dup {
			return errs.Invalid(w.field("%sid", path), "dnsProvider[%d] publishes id %q already: one entry per id in an intent (another name or provider goes in another DNS provider intent)", j, id)
		}
		seen[id] = i
		host := strings.ToLower(e.GetExternalName())
		if err := checkHost(w.field("%sexternalName", path), host); err != nil {
			return err
		}
		if prev, dup := published[host]; dup {
			return errs.Invalid(w.field("%sexternalName", path), "%s is published by %s already: two runs would fight over its records", host, prev)
		}
		published[host] = w.field("%sexternalName", path)
		provider, err := dnsProvider(w.field("%sprovider", path), e)
		if err != nil {
			return err
		}
		r := ref.intent.resources[ref.index]
		clusters := intersect(r.clusters, withLabels(b.in.Clusters, kube.ParseList(e.GetClusterSelector())))
		if len(clusters) == 0 {
			return errs.Invalid(w.field("%scluster-selector", path), "none of the clusters running %s has every label of %q", r.target, e.GetClusterSelector())
		}
		selector := kube.Labels(b.in.Project, b.in.LogicalCloud)
		selector[GroupLabel], selector[IntentLabel], selector[DNSIDLabel] = cut63(b.in.Group), cut63(name), cut63(id)
		run := DNSRun{Intent: name, ID: id, ExternalName: host, Provider: provider, Selector: selector}
		for _, c := range clusters {
			t := b.in.Clusters[c]
			record, err := recordType(w, t, id)
			if err != nil {
				return err
			}
			obj := &object{apiVersion: externalDNSV1, kind: "DNSEndpoint", name: Name(b.in.Group, name, id), rank: rankDNSEndpoint,
				owner: o, extra: map[string]string{DNSIDLabel: id}, spec: map[string]any{"endpoints": []any{map[string]any{
					"dnsName": host, "recordType": record, "targets": []any{t.Address}, "recordTTL": DNSRecordTTL,
				}}}}
			if err := b.add(c, obj); err != nil {
				return err
			}
			b.publishing[c] = true
			run.Clusters = append(run.Clusters, t)
		}
		b.dnsHosts[id] = appendNew(b.dnsHosts[id], host)
		b.runs = append(b.runs, run)
	}
	return nil
}

// recordType is the record a cluster's address makes: A for IPv4, AAAA
// for IPv6. A host name would need a CNAME, which cannot share the name
// with the other clusters' addresses: refused.
func recordType(w where, t Target, id string) (string, error) {
	if t.Address == "" {
		return "", errs.FailedPrecondition("%s: cluster %s/%s publishes %s and has no loadbalancer-ip (its ingress gateway's address)",
			w, t.Provider, t.Cluster, id)
	}
	a, err := netip.ParseAddr(t.Address)
	if err != nil || a.Zone() != "" {
		return "", errs.FailedPrecondition("%s: cluster %s/%s's loadbalancer-ip %q is not an IP address: an A record cannot point at it",
			w, t.Provider, t.Cluster, t.Address)
	}
	if a.Is4() || a.Is4In6() {
		return "A", nil
	}
	return "AAAA", nil
}

// dnsProvider is the entry's external-dns provider: its own, else the one
// its parameters are named after (rfc2136-host...).
func dnsProvider(field string, e *trafficv1.DnsProvider) (string, error) {
	if p := e.GetProvider(); p != "" {
		if !slices.Contains(Providers, p) {
			return "", errs.Invalid(field, "provider %q is not one of %s", p, strings.Join(Providers, ", "))
		}
		return p, nil
	}
	for _, p := range Providers {
		for k := range e.GetExternalDnsParameters() {
			if strings.HasPrefix(k, p+"-") {
				return p, nil
			}
		}
	}
	return "", errs.Invalid(field, "no provider: name one (%s) or give its parameters", strings.Join(Providers, ", "))
}
