package render

import (
	"fmt"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// intercluster renders an inter-cluster intent: the target may be called
// by its clients from every cluster they run on. Where the target runs,
// an ALLOW policy admits the clients' identities on its port; where a
// client runs and the target does not, a ServiceEntry makes the target's
// own host name lead to the east-west gateways of the target's clusters;
// every client cluster gets the target host's DestinationRule with Istio
// mutual TLS (the east-west gateway routes on the SNI that only Istio
// mutual TLS sets); clients with egressgateway go through the egress
// gateway (docs/traffic.md).
func (b *builder) intercluster(it *trafficv1.InterclusterIntent) error {
	name := it.GetName()
	if name == "" {
		name = it.GetInboundServiceName()
	}
	w := whereOf(KindIntercluster, name)
	if err := checkLabel(w.field("name"), name); err != nil {
		return err
	}
	o := owner{name, KindIntercluster}
	target := it.GetInboundServiceName()
	if err := checkLabel(w.field("inboundservicename"), target); err != nil {
		return err
	}
	port := it.GetPort()
	if err := checkPort(w.field("port"), port); err != nil {
		return err
	}
	proto, err := protocol(w.field("protocol"), it.GetProtocol(), "HTTP")
	if err != nil {
		return err
	}
	if len(it.GetClientServices()) == 0 {
		return errs.Invalid(w.field("clientServices"), "an inter-cluster intent needs at least one client")
	}
	targets, err := b.place(w, "", it.GetClusters(), it.GetClusterLabels())
	if err != nil {
		return err
	}
	if it.GetMutualTls() {
		b.mtls = true
	}
	host := svcHost(target, b.in.Namespace)
	var principals []string
	for i, c := range it.GetClientServices() {
		path := fmt.Sprintf("clientServices[%d].", i)
		cl, err := b.client(w, path, c, proto)
		if err != nil {
			return err
		}
		principals = appendNew(principals, cl.principals...)
		if c.GetEgressgateway() {
			// Through the egress gateway the target sees the gateway's
			// identity, not the client's.
			principals = appendNew(principals, principal(b.in.IstioNamespace, EgressGateway))
		}
		b.destination(o, "dr-"+target, host, true, it.GetLoadbalancing(), cl.clusters)
		if it.GetHeadless() {
			// Per-pod names resolve only where the target runs.
			b.destination(o, "pods-dr-"+target, "*."+host, true, it.GetLoadbalancing(), intersect(cl.clusters, targets))
		}
		if remote := minus(cl.clusters, targets); len(remote) > 0 {
			for _, t := range targets {
				if b.in.Clusters[t].Address == "" {
					return errs.FailedPrecondition("%s: cluster %s/%s runs %s for clients on other clusters and has no loadbalancer-ip (its east-west gateway's address)",
						w, b.in.Clusters[t].Provider, b.in.Clusters[t].Cluster, target)
				}
			}
			if err := b.entry(o, w.field("inboundservicename"), "se-"+target, host, true, port, proto, targets, remote); err != nil {
				return err
			}
		}
		if c.GetEgressgateway() {
			if err := b.egressRoute(o, w.field("%segressgateway", path), host, target, port, proto, true, c.GetClientServiceName(), cl.clusters); err != nil {
				return err
			}
		}
	}
	return b.addAll(targets, allowPolicy(o, Name(b.in.Group, name, "allow-"+target), target, principals, port))
}

// client is a client service resolved: where it runs and who it is.
type client struct {
	clusters   []int
	principals []string
}

// client resolves an in-mesh client (inter- or intra-cluster): its name
// is a Service's, its protocol (if given) the target's.
func (b *builder) client(w where, path string, c *trafficv1.ClientService, proto string) (client, error) {
	if err := checkLabel(w.field("%sclientServiceName", path), c.GetClientServiceName()); err != nil {
		return client{}, err
	}
	if c.GetProtocol() != "" {
		p, err := protocol(w.field("%sprotocol", path), c.GetProtocol(), "")
		if err != nil {
			return client{}, err
		}
		if p != proto {
			return client{}, errs.Invalid(w.field("%sprotocol", path), "the client speaks %s to a target port of protocol %s", p, proto)
		}
	}
	clusters, err := b.place(w, path, c.GetClusters(), c.GetClusterLabels())
	if err != nil {
		return client{}, err
	}
	sas := c.GetServiceaccounts()
	if len(sas) == 0 {
		sas = []string{c.GetClientServiceName()}
	}
	var ps []string
	for i, sa := range sas {
		if err := checkLabel(w.field("%sserviceaccounts[%d]", path, i), sa); err != nil {
			return client{}, err
		}
		ps = appendNew(ps, principal(b.in.Namespace, sa))
	}
	return client{clusters: clusters, principals: ps}, nil
}
