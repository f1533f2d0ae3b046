package render

import (
	"fmt"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// resource is a connectivity resource resolved: its target Service,
// port, protocol and where it runs.
type resource struct {
	path     string // "connectivityResource[i]."
	id       string
	target   string
	host     string
	port     int32
	proto    string
	clusters []int
}

// intentName is a connectivity intent's name: its own, else its first
// resource's id.
func intentName(it *trafficv1.ConnectivityIntent) string {
	if it.GetName() != "" {
		return it.GetName()
	}
	if rs := it.GetConnectivityResource(); len(rs) > 0 {
		return rs[0].GetId()
	}
	return ""
}

// resources resolves an intent's connectivity resources (ids unique in
// the intent, targets Service names, ports, protocols, placement).
func (b *builder) resources(kind string, it *trafficv1.ConnectivityIntent) (where, []resource, error) {
	name := intentName(it)
	w := whereOf(kind, name)
	if err := checkLabel(w.field("name"), name); err != nil {
		return w, nil, err
	}
	if len(it.GetConnectivityResource()) == 0 {
		return w, nil, errs.Invalid(w.field("connectivityResource"), "the intent names no microservice")
	}
	var out []resource
	seen := map[string]int{}
	for i, r := range it.GetConnectivityResource() {
		path := fmt.Sprintf("connectivityResource[%d].", i)
		if err := checkLabel(w.field("%sid", path), r.GetId()); err != nil {
			return w, nil, err
		}
		if j, ok := seen[r.GetId()]; ok {
			return w, nil, errs.Invalid(w.field("%sid", path), "id %q is also connectivityResource[%d]'s", r.GetId(), j)
		}
		seen[r.GetId()] = i
		if err := checkLabel(w.field("%sname", path), r.GetName()); err != nil {
			return w, nil, err
		}
		if err := checkPort(w.field("%sport", path), r.GetPort()); err != nil {
			return w, nil, err
		}
		proto, err := protocol(w.field("%sprotocol", path), r.GetProtocol(), "HTTP")
		if err != nil {
			return w, nil, err
		}
		clusters, err := b.place(w, path, r.GetClusters(), r.GetClusterLabels())
		if err != nil {
			return w, nil, err
		}
		if r.GetMutualTls() {
			b.mtls = true
		}
		out = append(out, resource{path: path, id: r.GetId(), target: r.GetName(), host: svcHost(r.GetName(), b.in.Namespace),
			port: r.GetPort(), proto: proto, clusters: clusters})
	}
	return w, out, nil
}

// intracluster renders an intra-cluster intent: on each cluster where a
// target runs, an ALLOW policy admits its clients' identities on its
// port (no clients: none is admitted but by other intents); its
// DestinationRule (mutual TLS, LEAST_REQUEST) goes where it and its
// clients run.
func (b *builder) intracluster(it *trafficv1.ConnectivityIntent) error {
	w, rs, err := b.resources(KindIntracluster, it)
	if err != nil {
		return err
	}
	o := owner{intentName(it), KindIntracluster}
	for i, r := range rs {
		spec := it.GetConnectivityResource()[i]
		clusters := r.clusters
		var principals []string
		for j, c := range spec.GetClientServices() {
			cl, err := b.client(w, fmt.Sprintf("%sclientServices[%d].", r.path, j), c, r.proto)
			if err != nil {
				return err
			}
			principals = appendNew(principals, cl.principals...)
			clusters = union(clusters, cl.clusters)
		}
		mtls, lb := spec.GetMutualTls(), spec.GetLoadbalancing()
		b.destination(o, "dr-"+r.target, r.host, mtls, lb, clusters)
		if spec.GetHeadless() {
			b.destination(o, "pods-dr-"+r.target, "*."+r.host, mtls, lb, clusters)
		}
		if len(principals) == 0 {
			continue
		}
		ap := allowPolicy(o, Name(b.in.Group, o.intent, "allow-"+r.id), r.target, principals, r.port)
		if err := b.addAll(r.clusters, ap); err != nil {
			return err
		}
	}
	return nil
}
