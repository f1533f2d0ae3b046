package render

import (
	"slices"
	"strconv"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
)

// destRule is the group's one DestinationRule for a host: Istio does not
// merge two rules for one host predictably, so intents asking for the
// same host share it, the strictest asking winning (mutual TLS if any
// asks, LEAST_REQUEST if any asks). It is named after, and labelled with,
// the first intent that asks for it (intercluster, intracluster, external
// outbound, external inbound; each by name).
type destRule struct {
	host, what string
	owner      owner
	mtls, lb   bool
	clusters   []int
}

// destination asks for host's DestinationRule on clusters.
func (b *builder) destination(o owner, what, host string, mtls, lb bool, clusters []int) {
	if len(clusters) == 0 {
		return
	}
	i := slices.IndexFunc(b.dests, func(d *destRule) bool { return d.host == host })
	if i < 0 {
		b.dests = append(b.dests, &destRule{host: host, what: what, owner: o})
		i = len(b.dests) - 1
	}
	d := b.dests[i]
	d.mtls = d.mtls || mtls
	d.lb = d.lb || lb
	d.clusters = union(d.clusters, clusters)
}

// destRules makes the DestinationRules; one without a policy is left out.
func (b *builder) destRules() error {
	for _, d := range b.dests {
		if !d.mtls && !d.lb {
			continue
		}
		policy := map[string]any{}
		if d.mtls {
			policy["tls"] = map[string]any{"mode": "ISTIO_MUTUAL"}
		}
		if d.lb {
			// Locality failover off: requests spread over the endpoints
			// of every cluster, which is what loadbalancing asks for.
			policy["loadBalancer"] = map[string]any{"simple": "LEAST_REQUEST", "localityLbSetting": map[string]any{"enabled": false}}
		}
		o := &object{apiVersion: networkingV1, kind: "DestinationRule", name: Name(b.in.Group, d.owner.intent, d.what),
			rank: rankDestinationRule, owner: d.owner,
			spec: map[string]any{"host": d.host, "trafficPolicy": policy, "exportTo": b.exportTo()}}
		if err := b.addAll(d.clusters, o); err != nil {
			return err
		}
	}
	return nil
}

// serviceEntry is the group's one ServiceEntry for a host: an external
// service (MESH_EXTERNAL, DNS) or a service of another cluster
// (MESH_INTERNAL, its clusters' east-west gateways as endpoints).
type serviceEntry struct {
	host, what string
	owner      owner
	field      string
	internal   bool
	ports      []sePort
	// endpoints (internal): cluster indexes whose east-west gateway
	// leads to the service.
	endpoints []int
	clusters  []int
}

type sePort struct {
	number int32
	proto  string
}

// entry asks for host's ServiceEntry on clusters, with port; field names
// what asks, for a conflict (one port number, two protocols).
func (b *builder) entry(o owner, field, what, host string, internal bool, port int32, proto string, endpoints, clusters []int) error {
	if len(clusters) == 0 {
		return nil
	}
	i := slices.IndexFunc(b.entries, func(e *serviceEntry) bool { return e.host == host })
	if i < 0 {
		b.entries = append(b.entries, &serviceEntry{host: host, what: what, owner: o, field: field, internal: internal})
		i = len(b.entries) - 1
	}
	e := b.entries[i]
	if e.internal != internal {
		return errs.Invalid(field, "%s is a service of the logical cloud for %s and an external service here", host, e.field)
	}
	j := slices.IndexFunc(e.ports, func(p sePort) bool { return p.number == port })
	switch {
	case j < 0:
		e.ports = append(e.ports, sePort{port, proto})
	case e.ports[j].proto != proto:
		return errs.Invalid(field, "port %d of %s is %s for %s, not %s", port, host, e.ports[j].proto, e.field, proto)
	}
	e.endpoints = union(e.endpoints, endpoints)
	e.clusters = union(e.clusters, clusters)
	return nil
}

// serviceEntries makes the ServiceEntries.
func (b *builder) serviceEntries() error {
	for _, e := range b.entries {
		ports := slices.Clone(e.ports)
		slices.SortFunc(ports, func(x, y sePort) int { return int(x.number - y.number) })
		var ps []any
		for _, p := range ports {
			ps = append(ps, map[string]any{"number": p.number, "name": portName(p.proto, p.number), "protocol": p.proto})
		}
		spec := map[string]any{"hosts": []any{e.host}, "ports": ps, "exportTo": b.exportTo()}
		if !e.internal {
			spec["location"], spec["resolution"] = "MESH_EXTERNAL", "DNS"
		} else {
			spec["location"] = "MESH_INTERNAL"
			resolution := "STATIC"
			var eps []any
			for _, c := range e.endpoints {
				t := b.in.Clusters[c]
				if !isIP(t.Address) {
					resolution = "DNS"
				}
				epPorts := map[string]any{}
				for _, p := range ports {
					epPorts[portName(p.proto, p.number)] = EastWestPort
				}
				eps = append(eps, map[string]any{"address": t.Address, "network": kube.MeshClusterID(t.Provider, t.Cluster), "ports": epPorts})
			}
			spec["resolution"], spec["endpoints"] = resolution, eps
		}
		o := &object{apiVersion: networkingV1, kind: "ServiceEntry", name: Name(b.in.Group, e.owner.intent, e.what),
			rank: rankServiceEntry, owner: e.owner, spec: spec}
		if err := b.addAll(e.clusters, o); err != nil {
			return err
		}
	}
	return nil
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
