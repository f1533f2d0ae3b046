package render

import (
	"fmt"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// outbound renders an external outbound intent: each connectivity
// resource's Service calls the external services named by its clients
// (FQDNs). Where it runs, a ServiceEntry (MESH_EXTERNAL, DNS) makes each
// known to the mesh; with egressgateway (on the resource or the client)
// its calls leave through the logical cloud's egress gateway, with Istio
// mutual TLS from the sidecar to the gateway when mutualTLS is set.
func (b *builder) outbound(it *trafficv1.ConnectivityIntent) error {
	w, rs, err := b.resources(KindOutbound, it)
	if err != nil {
		return err
	}
	o := owner{intentName(it), KindOutbound}
	for i, r := range rs {
		spec := it.GetConnectivityResource()[i]
		if len(spec.GetClientServices()) == 0 {
			return errs.Invalid(w.field("%sclientServices", r.path), "an external outbound resource names the external services it calls")
		}
		for j, c := range spec.GetClientServices() {
			path := fmt.Sprintf("%sclientServices[%d].", r.path, j)
			host := c.GetClientServiceName()
			if err := checkHost(w.field("%sclientServiceName", path), host); err != nil {
				return err
			}
			proto, err := protocol(w.field("%sprotocol", path), c.GetProtocol(), r.proto)
			if err != nil {
				return err
			}
			port := c.GetPort()
			if port == 0 {
				port = defaultPort(proto)
			}
			if port == 0 {
				return errs.Invalid(w.field("%sport", path), "a %s external service needs its port", proto)
			}
			if err := checkPort(w.field("%sport", path), port); err != nil {
				return err
			}
			if err := b.entry(o, w.field("%sclientServiceName", path), "se-"+hostWord(host), host, false, port, proto, nil, r.clusters); err != nil {
				return err
			}
			if spec.GetEgressgateway() || c.GetEgressgateway() {
				err := b.egressRoute(o, w.field("%sclientServiceName", path), host, hostWord(host), port, proto, spec.GetMutualTls(), r.target, r.clusters)
				if err != nil {
					return err
				}
			}
		}
	}
	return nil
}
