package render

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/dcm-project/dcm/platform/kube"
)

// Label keys the traffic controller adds to every object it renders,
// besides the logical cloud's (kube.Labels), so that a group's, an
// intent's or a DNS entry's objects can be listed by label.
const (
	// GroupLabel is the traffic intent group's name.
	GroupLabel = "traffic.dcm.io/group"
	// IntentLabel is the intent's name (not on the group's own objects).
	IntentLabel = "traffic.dcm.io/intent"
	// KindLabel is what made the object: one of the Kind* values.
	KindLabel = "traffic.dcm.io/kind"
	// DNSIDLabel is the DNS provider entry's id (DNSEndpoint objects).
	DNSIDLabel = "traffic.dcm.io/dns-id"
)

// Values of KindLabel.
const (
	KindIntercluster = "intercluster"
	KindIntracluster = "intracluster"
	KindOutbound     = "external-outbound"
	KindInbound      = "external-inbound"
	KindDNS          = "dns"
	// KindGroup marks the group's own objects: the namespace's deny-all
	// AuthorizationPolicy and the mutual TLS PeerAuthentication.
	KindGroup = "group"
)

// The logical cloud's gateways, rendered by the service mesh service into
// its Istio namespace (docs/mesh.md): Deployment, Service and
// ServiceAccount share the name; pods carry {GatewayLabel: <value>} and
// the logical cloud's labels; both Services have ports 80 (http2) and 443
// (https).
const (
	// IngressGateway is the ingress gateway's name.
	IngressGateway = "istio-ingressgateway"
	// EgressGateway is the egress gateway's name.
	EgressGateway = "istio-egressgateway"
	// GatewayLabel is the pod label Istio's gateways are selected by.
	GatewayLabel = "istio"
	// IngressGatewayValue is GatewayLabel's value on ingress gateway pods.
	IngressGatewayValue = "ingressgateway"
	// EgressGatewayValue is GatewayLabel's value on egress gateway pods.
	EgressGatewayValue = "egressgateway"
	// GatewayHTTPPort is the gateways' plain port (Service port http2).
	GatewayHTTPPort = 80
	// GatewayTLSPort is the gateways' TLS port (Service port https).
	GatewayTLSPort = 443
	// EastWestPort is the east-west gateway's mTLS passthrough port (as
	// the service mesh renders it).
	EastWestPort = 15443
	// AppLabel selects a microservice's pods (Istio's convention).
	AppLabel = "app"
	// DNSRecordTTL is the TTL of the published DNS records, in seconds.
	DNSRecordTTL = 300
)

// GatewaySelector selects one of the logical cloud's gateways (value is
// IngressGatewayValue or EgressGatewayValue) and no other logical cloud's.
func GatewaySelector(project, lc, value string) map[string]string {
	sel := kube.Labels(project, lc)
	sel[GatewayLabel] = value
	return sel
}

// Name is the name of an object of an intent: group-intent-what, cut to
// 63 characters with a hash of the whole when longer, so that it stays a
// DNS label (Istio refers to Gateways by namespace/name) and unique.
func Name(group, intent, what string) string {
	return cut63(group + "-" + intent + "-" + what)
}

// groupName is the name of one of the group's own objects.
func groupName(group, what string) string { return cut63(group + "-" + what) }

// cut63 keeps s if it has at most 63 characters, else cuts it to 54, trims
// trailing dashes and appends "-" and 8 hex digits of the SHA-256 of s.
func cut63(s string) string {
	if len(s) <= 63 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return strings.TrimRight(s[:54], "-.") + "-" + hex.EncodeToString(sum[:4])
}

// hostWord turns a host name into a part of a name or a subset name (a
// DNS label): dots become dashes, a leading wildcard is dropped.
func hostWord(host string) string {
	host = strings.TrimPrefix(host, "*.")
	return cut63(strings.ReplaceAll(strings.ToLower(host), ".", "-"))
}

// owner is who an object belongs to: the intent (empty for the group's
// own objects) and its kind.
type owner struct {
	intent, kind string
}

// labels are an object's labels: the logical cloud's, the group's, the
// owner's and extra.
func (b *builder) labels(o owner, extra map[string]string) map[string]string {
	l := kube.Labels(b.in.Project, b.in.LogicalCloud)
	l[GroupLabel] = cut63(b.in.Group)
	if o.intent != "" {
		l[IntentLabel] = cut63(o.intent)
	}
	l[KindLabel] = o.kind
	for k, v := range extra {
		l[k] = cut63(v)
	}
	return l
}

// svcHost is the cluster-local host name of Service svc in namespace ns.
func svcHost(svc, ns string) string { return svc + "." + ns + ".svc.cluster.local" }

// principal is the authorization principal of ServiceAccount sa in ns: a
// suffix match, so that no trust domain is needed (the logical cloud's
// clusters share one; other trust domains are not federated).
func principal(ns, sa string) string { return "*/ns/" + ns + "/sa/" + sa }
