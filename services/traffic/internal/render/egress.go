package render

import (
	"slices"

	"github.com/dcm-project/dcm/platform/errs"
)

// egressHost is a host that some services reach through the logical
// cloud's egress gateway, as Istio's egress gateway tasks configure it: a
// Gateway for the host on the egress gateway, a VirtualService routing
// the services' requests (mesh, by their app label) to the egress gateway
// and the egress gateway's on to the host, and a subset of the egress
// gateway's DestinationRule (mutual TLS with the host as SNI when the
// sidecar-to-gateway leg is Istio mutual TLS). One per group and host:
// Istio takes only one VirtualService per host for sidecars.
type egressHost struct {
	// host, and word: its part of names and the subset's name.
	host, word string
	owner      owner
	field      string
	port       int32
	proto      string
	mtls       bool
	// apps by cluster index: the services sent through the gateway.
	apps map[int][]string
}

// egressRoute sends app's traffic to host:port (proto) through the egress
// gateway on clusters. mtls asks for Istio mutual TLS between the sidecar
// and the gateway; TCP always has it, since the gateway could not tell
// one TCP host from another on its port otherwise (the SNI carries it).
// One host goes through the gateway on one port only: the gateway's side
// of the route has nothing else to choose the port by.
func (b *builder) egressRoute(o owner, field, host, word string, port int32, proto string, mtls bool, app string, clusters []int) error {
	i := slices.IndexFunc(b.egress, func(e *egressHost) bool { return e.host == host })
	if i < 0 {
		if j := slices.IndexFunc(b.egress, func(e *egressHost) bool { return e.word == word }); j >= 0 {
			return errs.Invalid(field, "%s and %s (for %s) would share the egress gateway's subset %s", host, b.egress[j].host, b.egress[j].field, word)
		}
		b.egress = append(b.egress, &egressHost{host: host, word: word, owner: o, field: field, port: port, proto: proto, apps: map[int][]string{}})
		i = len(b.egress) - 1
	}
	e := b.egress[i]
	if e.port != port || familyOf(e.proto) != familyOf(proto) {
		return errs.Invalid(field, "%s goes through the egress gateway on port %d (%s) for %s; one port and protocol per host",
			host, e.port, e.proto, e.field)
	}
	e.mtls = e.mtls || mtls || familyOf(proto) == familyTCP
	for _, c := range clusters {
		e.apps[c] = appendNew(e.apps[c], app)
	}
	return nil
}

// egressObjects makes each egress host's Gateway and VirtualService and,
// on each cluster with any, the group's egress gateway DestinationRule.
func (b *builder) egressObjects() error {
	subsets := make([][]any, len(b.in.Clusters))
	for _, e := range b.egress {
		name := Name(b.in.Group, e.owner.intent, "egress-"+e.word)
		subset := e.word
		gw := b.egressGateway(e, name)
		s := map[string]any{"name": subset}
		if e.mtls {
			s["trafficPolicy"] = map[string]any{"portLevelSettings": []any{map[string]any{
				"port": map[string]any{"number": GatewayTLSPort},
				"tls":  map[string]any{"mode": "ISTIO_MUTUAL", "sni": e.host},
			}}}
		}
		for c := range b.in.Clusters {
			if len(e.apps[c]) == 0 {
				continue
			}
			if err := b.add(c, gw); err != nil {
				return err
			}
			vs := &object{apiVersion: networkingV1, kind: "VirtualService", name: name, rank: rankVirtualService, owner: e.owner,
				spec: b.egressRoutes(e, name, subset, e.apps[c])}
			if err := b.add(c, vs); err != nil {
				return err
			}
			subsets[c] = append(subsets[c], s)
		}
	}
	for c, ss := range subsets {
		if len(ss) == 0 {
			continue
		}
		dr := &object{apiVersion: networkingV1, kind: "DestinationRule", name: groupName(b.in.Group, EgressGatewayValue),
			rank: rankDestinationRule, owner: owner{kind: KindGroup},
			spec: map[string]any{"host": svcHost(EgressGateway, b.in.IstioNamespace), "subsets": ss, "exportTo": b.exportTo()}}
		if err := b.add(c, dr); err != nil {
			return err
		}
	}
	return nil
}

// gatewayPort is the egress gateway's port for e: 443 with Istio mutual
// TLS or TLS passthrough, 80 for plain HTTP.
func gatewayPort(e *egressHost) int32 {
	if !e.mtls && familyOf(e.proto) == familyHTTP {
		return GatewayHTTPPort
	}
	return GatewayTLSPort
}

// egressGateway is e's Gateway on the egress gateway.
func (b *builder) egressGateway(e *egressHost, name string) *object {
	server := map[string]any{"hosts": []any{e.host}}
	switch {
	case familyOf(e.proto) == familyHTTP && !e.mtls:
		server["port"] = map[string]any{"number": GatewayHTTPPort, "name": "http", "protocol": "HTTP"}
	case familyOf(e.proto) == familyHTTP:
		server["port"] = map[string]any{"number": GatewayTLSPort, "name": "https", "protocol": "HTTPS"}
		server["tls"] = map[string]any{"mode": "ISTIO_MUTUAL"}
	case e.mtls:
		server["port"] = map[string]any{"number": GatewayTLSPort, "name": "tls", "protocol": "TLS"}
		server["tls"] = map[string]any{"mode": "ISTIO_MUTUAL"}
	default:
		server["port"] = map[string]any{"number": GatewayTLSPort, "name": "tls", "protocol": "TLS"}
		server["tls"] = map[string]any{"mode": "PASSTHROUGH"}
	}
	return &object{apiVersion: networkingV1, kind: "Gateway", name: name, rank: rankGateway, owner: e.owner,
		spec: map[string]any{
			"selector": GatewaySelector(b.in.Project, b.in.LogicalCloud, EgressGatewayValue),
			"servers":  []any{server},
		}}
}

// egressRoutes is e's VirtualService spec on a cluster where apps send
// through the gateway: their requests (matched by app label) go to the
// egress gateway's subset, the gateway's go on to the host, and every
// other sidecar's go to the host directly (a VirtualService for a host
// binds all of the namespace's sidecars).
func (b *builder) egressRoutes(e *egressHost, name, subset string, apps []string) map[string]any {
	gwRef := b.in.Namespace + "/" + name
	gwPort := gatewayPort(e)
	toGateway := []any{map[string]any{"destination": map[string]any{
		"host": svcHost(EgressGateway, b.in.IstioNamespace), "subset": subset, "port": map[string]any{"number": gwPort}}}}
	direct := []any{map[string]any{"destination": map[string]any{"host": e.host, "port": map[string]any{"number": e.port}}}}
	sni := familyOf(e.proto) == familyTLS
	mesh := func(app string) map[string]any {
		m := map[string]any{"gateways": []any{"mesh"}, "port": e.port}
		if app != "" {
			m["sourceLabels"] = map[string]any{AppLabel: app}
		}
		if sni {
			m["sniHosts"] = []any{e.host}
		}
		return m
	}
	var fromApps []any
	for _, a := range apps {
		fromApps = append(fromApps, mesh(a))
	}
	fromGateway := map[string]any{"gateways": []any{gwRef}, "port": gwPort}
	sidecars := []any{
		map[string]any{"match": fromApps, "route": toGateway},
		map[string]any{"match": []any{mesh("")}, "route": direct},
	}
	spec := map[string]any{"hosts": []any{e.host}, "gateways": []any{"mesh", gwRef}, "exportTo": b.exportTo()}
	switch {
	case familyOf(e.proto) == familyHTTP:
		spec["http"] = []any{sidecars[0], map[string]any{"match": []any{fromGateway}, "route": direct}, sidecars[1]}
	case sni && !e.mtls:
		// TLS passthrough: the gateway routes on the SNI too.
		fromGateway["sniHosts"] = []any{e.host}
		spec["tls"] = []any{sidecars[0], map[string]any{"match": []any{fromGateway}, "route": direct}, sidecars[1]}
	case sni:
		// The gateway ends the Istio mutual TLS and forwards the
		// service's own TLS as TCP.
		spec["tls"] = sidecars
		spec["tcp"] = []any{map[string]any{"match": []any{fromGateway}, "route": direct}}
	default:
		spec["tcp"] = []any{sidecars[0], map[string]any{"match": []any{fromGateway}, "route": direct}, sidecars[1]}
	}
	return spec
}
