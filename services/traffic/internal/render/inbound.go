package render

import (
	"slices"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// inboundIntent is an external inbound intent resolved before the DNS
// provider intents, which refer to its resources by id.
type inboundIntent struct {
	it        *trafficv1.ConnectivityIntent
	w         where
	resources []resource
}

// inboundRef is where an external inbound resource is, by id.
type inboundRef struct {
	intent *inboundIntent
	index  int
}

// resolveInbound resolves the external inbound intents and indexes their
// resources by id, which must be unique in the group: a DNS provider
// entry names the resource it publishes by it.
func (b *builder) resolveInbound(its []*trafficv1.ConnectivityIntent) ([]*inboundIntent, map[string]inboundRef, error) {
	var out []*inboundIntent
	ids := map[string]inboundRef{}
	for _, it := range its {
		w, rs, err := b.resources(KindInbound, it)
		if err != nil {
			return nil, nil, err
		}
		in := &inboundIntent{it: it, w: w, resources: rs}
		for i, r := range rs {
			if prev, ok := ids[r.id]; ok {
				return nil, nil, errs.Invalid(w.field("%sid", r.path), "id %q is also a resource of %s (DNS provider entries refer to one of them by it)",
					r.id, prev.intent.w)
			}
			ids[r.id] = inboundRef{in, i}
		}
		out = append(out, in)
	}
	return out, ids, nil
}

// inbound renders an external inbound intent: each resource's Service is
// reached from outside through the logical cloud's ingress gateway by its
// external host names (externalPrefix.domain, and the externalName of
// each DNS provider entry with its id). Where it runs: a Gateway on the
// ingress gateway for the names (HTTP on port 80; HTTPS and TLS passed
// through on 443, routed by SNI), a VirtualService to the Service's port,
// and an ALLOW policy admitting the ingress gateway's identity.
func (b *builder) inbound(in *inboundIntent) error {
	w := in.w
	o := owner{intentName(in.it), KindInbound}
	for i, r := range in.resources {
		spec := in.it.GetConnectivityResource()[i]
		var hosts []string
		if p := spec.GetExternalPrefix(); p != "" {
			if spec.GetDomain() == "" {
				return errs.Invalid(w.field("%sdomain", r.path), "externalPrefix %q needs a domain: the host is <externalPrefix>.<domain>", p)
			}
			h := p + "." + spec.GetDomain()
			if err := checkHost(w.field("%sdomain", r.path), h); err != nil {
				return err
			}
			hosts = append(hosts, h)
		}
		hosts = appendNew(hosts, b.dnsHosts[r.id]...)
		if len(hosts) == 0 {
			return errs.Invalid(w.field("%sexternalPrefix", r.path),
				"no external host name: give externalPrefix and domain, or a DNS provider entry with id %q", r.id)
		}
		slices.Sort(hosts)
		var hs []any
		for _, h := range hosts {
			hs = append(hs, h)
		}
		name := Name(b.in.Group, o.intent, "ingress-"+r.id)
		dest := []any{map[string]any{"destination": map[string]any{"host": r.host, "port": map[string]any{"number": r.port}}}}
		server := map[string]any{"hosts": hs}
		vs := map[string]any{"hosts": hs, "gateways": []any{b.in.Namespace + "/" + name}, "exportTo": b.exportTo()}
		switch familyOf(r.proto) {
		case familyHTTP:
			server["port"] = map[string]any{"number": GatewayHTTPPort, "name": "http", "protocol": "HTTP"}
			vs["http"] = []any{map[string]any{"route": dest}}
		case familyTLS:
			// Passed through: the Service ends its own TLS; the gateway
			// routes on the SNI.
			server["port"] = map[string]any{"number": GatewayTLSPort, "name": "tls", "protocol": "TLS"}
			server["tls"] = map[string]any{"mode": "PASSTHROUGH"}
			vs["tls"] = []any{map[string]any{"match": []any{map[string]any{"port": GatewayTLSPort, "sniHosts": hs}}, "route": dest}}
		default:
			return errs.Invalid(w.field("%sprotocol", r.path),
				"external inbound access is HTTP (port 80) or TLS passed through (443): the ingress gateway has no port for %s", r.proto)
		}
		objs := []*object{
			{apiVersion: networkingV1, kind: "Gateway", name: name, rank: rankGateway, owner: o, spec: map[string]any{
				"selector": GatewaySelector(b.in.Project, b.in.LogicalCloud, IngressGatewayValue),
				"servers":  []any{server},
			}},
			{apiVersion: networkingV1, kind: "VirtualService", name: name, rank: rankVirtualService, owner: o, spec: vs},
			allowPolicy(o, name, r.target, []string{principal(b.in.IstioNamespace, IngressGateway)}, r.port),
		}
		for _, obj := range objs {
			if err := b.addAll(r.clusters, obj); err != nil {
				return err
			}
		}
		b.destination(o, "dr-"+r.target, r.host, spec.GetMutualTls(), spec.GetLoadbalancing(), r.clusters)
	}
	return nil
}
