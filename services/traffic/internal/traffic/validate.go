package traffic

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/rollout"
)

// Checks beyond the proto's rules (protovalidate runs before a call reaches
// the service). Every error names the field by its JSON path in the body,
// prefixed by the request field that carries the body; the gateway strips
// that prefix for REST callers.

// protocols are Istio's port protocols an intent may name.
var protocols = []string{"HTTP", "HTTPS", "HTTP2", "GRPC", "TCP", "TLS", "MONGO"}

var (
	labelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	// hostLabelRE is one label of an RFC 1123 host name (any case).
	hostLabelRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?$`)
)

// isLabel tells whether s is a DNS-1123 label (a Kubernetes Service name).
func isLabel(s string) bool { return len(s) <= 63 && labelRE.MatchString(s) }

// isHostname tells whether s is an RFC 1123 host name without a trailing dot.
func isHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if len(l) > 63 || !hostLabelRE.MatchString(l) {
			return false
		}
	}
	return true
}

// isFQDN tells whether s is a fully qualified external host name: a host
// name with at least one dot, no wildcard, not an IP address.
func isFQDN(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return false
	}
	return strings.Contains(s, ".") && isHostname(s)
}

// protocol checks an Istio protocol (case-insensitive, empty allowed) and
// returns it upper-cased, as it is stored.
func protocol(field, p string) (string, error) {
	if p == "" {
		return "", nil
	}
	u := strings.ToUpper(p)
	for _, q := range protocols {
		if u == q {
			return u, nil
		}
	}
	return "", errs.Invalid(field, "%q is not a protocol: one of %s (any case), or empty", p, strings.Join(protocols, ", "))
}

// placement checks where a service runs: clusters listed once, labels non-empty.
func placement(field string, clusters []*trafficv1.TrafficCluster, labels []string) error {
	seen := map[[2]string]bool{}
	for i, c := range clusters {
		k := [2]string{c.GetClusterProvider(), c.GetClusterName()}
		if seen[k] {
			return errs.Invalid(fmt.Sprintf("%sclusters[%d]", field, i), "cluster %s/%s is listed twice", k[0], k[1])
		}
		seen[k] = true
	}
	for i, l := range labels {
		if strings.TrimSpace(l) == "" || len(l) > 63 {
			return errs.Invalid(fmt.Sprintf("%scluster-labels[%d]", field, i), "a cluster label is a non-empty string of at most 63 characters")
		}
	}
	return nil
}

// kind tells the connectivity intents apart where their rules differ.
type kind int

const (
	kindIntercluster kind = iota
	kindIntracluster
	kindOutbound
	kindInbound
)

// clients checks a target's clients (external services for outbound),
// upper-casing their protocols. inherited is the target's protocol.
func clients(field string, k kind, inherited string, cs []*trafficv1.ClientService) error {
	names := map[string]bool{}
	for i, c := range cs {
		p := fmt.Sprintf("%sclientServices[%d].", field, i)
		name := c.GetClientServiceName()
		if k == kindOutbound {
			if !isFQDN(name) {
				return errs.Invalid(p+"clientServiceName", "%q is not the FQDN of an external service (a host name with a dot, no wildcard, no IP address)", name)
			}
		} else if !isLabel(name) {
			return errs.Invalid(p+"clientServiceName", "%q is not a Service name (a DNS-1123 label)", name)
		}
		if names[name] {
			return errs.Invalid(p+"clientServiceName", "client %q is listed twice", name)
		}
		names[name] = true
		proto, err := protocol(p+"protocol", c.GetProtocol())
		if err != nil {
			return err
		}
		c.Protocol = proto
		if k == kindOutbound {
			if t := c.GetType(); t != "" && t != "external" {
				return errs.Invalid(p+"type", "an external outbound client's type is \"external\" (or empty), not %q", t)
			}
			eff := proto
			if eff == "" {
				eff = inherited
			}
			if eff == "TCP" && c.GetPort() <= 0 {
				return errs.Invalid(p+"port", "a TCP external service needs its port")
			}
		}
		if err := placement(p, c.GetClusters(), c.GetClusterLabels()); err != nil {
			return err
		}
	}
	return nil
}

// checkIntercluster checks an inter-cluster intent; field is the body's
// path prefix ("intercluster_intent.").
func checkIntercluster(field string, m *trafficv1.InterclusterIntent) error {
	p, err := protocol(field+"protocol", m.GetProtocol())
	if err != nil {
		return err
	}
	m.Protocol = p
	if err := clients(field, kindIntercluster, p, m.GetClientServices()); err != nil {
		return err
	}
	return placement(field, m.GetClusters(), m.GetClusterLabels())
}

// checkConnectivity checks an intra-cluster, external outbound or external
// inbound intent.
func checkConnectivity(field string, k kind, m *trafficv1.ConnectivityIntent) error {
	ids := map[string]bool{}
	for i, r := range m.GetConnectivityResource() {
		f := fmt.Sprintf("%sconnectivityResource[%d].", field, i)
		if ids[r.GetId()] {
			return errs.Invalid(f+"id", "id %q is used twice in this intent", r.GetId())
		}
		ids[r.GetId()] = true
		p, err := protocol(f+"protocol", r.GetProtocol())
		if err != nil {
			return err
		}
		r.Protocol = p
		if k == kindInbound {
			if r.GetExternalPrefix() == "" {
				return errs.Invalid(f+"externalPrefix", "an external inbound service needs the first label of its external host name")
			}
			if r.GetDomain() == "" {
				return errs.Invalid(f+"domain", "an external inbound service needs the domain of its external host name")
			}
		}
		if err := clients(f, k, p, r.GetClientServices()); err != nil {
			return err
		}
		if err := placement(f, r.GetClusters(), r.GetClusterLabels()); err != nil {
			return err
		}
	}
	return nil
}

// checkGroup checks a group's body and returns it in its stored form: both
// name shapes filled, applied cleared (output only).
func checkGroup(field string, g *trafficv1.TrafficIntentGroup) (*trafficv1.TrafficIntentGroup, error) {
	name, err := either(field, "name", g.GetName(), g.GetMetadata().GetName())
	if err != nil {
		return nil, err
	}
	desc, err := either(field, "description", g.GetDescription(), g.GetMetadata().GetDescription())
	if err != nil {
		return nil, err
	}
	if g.GetMetadata().GetName() != "" && !isLabel(name) {
		return nil, errs.Invalid(field+"metadata.name", "%q is not a DNS-1123 label", name)
	}
	// The logical cloud may be left out (seed 004's group is {name,
	// description}): it is set later, once, and apply needs it.
	if err := rollout.Check(field+"rollout", g.GetRollout()); err != nil {
		return nil, err
	}
	out := &trafficv1.TrafficIntentGroup{Name: name, Description: desc, LogicalCloud: g.GetLogicalCloud(), Rollout: g.GetRollout()}
	out.Metadata = metadataOf(out)
	return out, nil
}

// either reads a value given flat or in metadata: both given must agree.
func either(field, name, flat, meta string) (string, error) {
	if flat != "" && meta != "" && flat != meta {
		return "", errs.Invalid(field+name, "%q and metadata.%s %q differ: give one, or both the same", flat, name, meta)
	}
	if flat != "" {
		return flat, nil
	}
	return meta, nil
}
