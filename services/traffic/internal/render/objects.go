package render

import (
	"cmp"
	"slices"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
)

// API versions of what the renderer makes.
const (
	networkingV1  = "networking.istio.io/v1"
	securityV1    = "security.istio.io/v1"
	externalDNSV1 = "externaldns.k8s.io/v1alpha1"
	rbacV1        = "rbac.authorization.k8s.io/v1"
)

// Ranks order a cluster's objects for applying: where traffic may go
// (ServiceEntry, DestinationRule), then how (Gateway, VirtualService),
// then who may (ALLOW policies), and only then the namespace-wide
// STRICT mutual TLS and deny-all, so that nothing the intents allow is
// refused while the objects arrive; the DNS name is published last, once
// its route exists.
const (
	rankServiceEntry = iota
	rankDestinationRule
	rankGateway
	rankVirtualService
	rankAllow
	rankPeerAuthentication
	rankDenyAll
	rankDNSEndpoint
	// rankReader: the DNS reader's ServiceAccount, Role and RoleBinding.
	rankReader
)

// object is one rendered object before it becomes JSON.
type object struct {
	apiVersion, kind, name string
	rank                   int
	owner                  owner
	// extra labels besides the owner's (the DNS entry's id).
	extra map[string]string
	spec  map[string]any
	// body holds the top-level fields of a kind without spec (the DNS
	// reader's ServiceAccount and RBAC objects) instead of spec.
	body map[string]any
}

// builder collects a group's objects per cluster. Objects several intents
// may ask for (one DestinationRule, ServiceEntry or egress route per
// host) are gathered first and made once, by finish.
type builder struct {
	in Input
	// objects per cluster index, and their owners by kind/name (two
	// intents whose names make the same object name are refused).
	objects [][]*object
	owners  []map[[2]string]owner
	// mtls: an intent asks for mutual TLS (PeerAuthentication STRICT).
	mtls bool

	dests   []*destRule
	entries []*serviceEntry
	egress  []*egressHost
	// dnsHosts are the external names of the DNS provider entries, by
	// connectivity resource id: the external inbound hosts besides
	// externalPrefix.domain.
	dnsHosts map[string][]string
	runs     []DNSRun
	// publishing are the clusters (indexes) with a DNSEndpoint: each gets
	// the group's DNS reader (dnsreader.go).
	publishing map[int]bool
}

func newBuilder(in Input) *builder {
	b := &builder{in: in, objects: make([][]*object, len(in.Clusters)), owners: make([]map[[2]string]owner, len(in.Clusters)),
		dnsHosts: map[string][]string{}, publishing: map[int]bool{}}
	for i := range b.owners {
		b.owners[i] = map[[2]string]owner{}
	}
	return b
}

// add puts o on cluster c. An object of the same kind and name from
// another owner means two intents' names run together (group-intent-what
// with dashes in names): refused, naming the later intent.
func (b *builder) add(c int, o *object) error {
	key := [2]string{o.kind, o.name}
	if prev, ok := b.owners[c][key]; ok {
		if prev == o.owner {
			// The same owner asks twice for one object: a bug.
			return errs.Internal(nil, "render: %s %s made twice by %s", o.kind, o.name, o.owner.intent)
		}
		return errs.Invalid(whereOf(o.owner.kind, o.owner.intent).field("name"),
			"the %s %s it needs is also the name of one of %s intent %s's objects; rename one of the intents",
			o.kind, o.name, prev.kind, prev.intent)
	}
	b.owners[c][key] = o.owner
	b.objects[c] = append(b.objects[c], o)
	return nil
}

// addAll puts o on each of clusters; the clusters share it (objects are
// not changed once made).
func (b *builder) addAll(clusters []int, o *object) error {
	for _, c := range clusters {
		if err := b.add(c, o); err != nil {
			return err
		}
	}
	return nil
}

// exportTo keeps an Istio object to the logical cloud's namespace and its
// gateways' (the Istio namespace): the ingress and egress gateways route
// by the group's VirtualServices, ServiceEntries and DestinationRules;
// no other namespace sees them.
func (b *builder) exportTo() []any {
	if b.in.IstioNamespace == b.in.Namespace {
		return []any{"."}
	}
	return []any{".", b.in.IstioNamespace}
}

// groupObjects adds the group's own objects to every cluster that has
// any: deny-all, and STRICT mutual TLS when an intent asks for it.
func (b *builder) groupObjects() {
	g := owner{kind: KindGroup}
	deny := &object{apiVersion: securityV1, kind: "AuthorizationPolicy", name: groupName(b.in.Group, "deny-all"),
		rank: rankDenyAll, owner: g, spec: kube.DenyAllPolicySpec()}
	mtls := &object{apiVersion: securityV1, kind: "PeerAuthentication", name: groupName(b.in.Group, "mtls"),
		rank: rankPeerAuthentication, owner: g, spec: map[string]any{"mtls": map[string]any{"mode": "STRICT"}}}
	for c := range b.objects {
		if len(b.objects[c]) == 0 {
			continue
		}
		// Group names cannot clash with intent objects' names: those
		// have one more dash-separated part, and deny-all and mtls are
		// not what any intent's objects end with.
		b.objects[c] = append(b.objects[c], deny)
		if b.mtls {
			b.objects[c] = append(b.objects[c], mtls)
		}
	}
}

// manifests are the clusters with objects, in Input order, each's objects
// sorted by rank and name.
func (b *builder) manifests() []ClusterManifests {
	var out []ClusterManifests
	for c, objs := range b.objects {
		if len(objs) == 0 {
			continue
		}
		sorted := slices.Clone(objs)
		slices.SortFunc(sorted, func(x, y *object) int {
			return cmp.Or(cmp.Compare(x.rank, y.rank), cmp.Compare(x.kind, y.kind), cmp.Compare(x.name, y.name))
		})
		cm := ClusterManifests{Provider: b.in.Clusters[c].Provider, Cluster: b.in.Clusters[c].Cluster}
		for _, o := range sorted {
			meta := kube.Meta{Name: o.name, Namespace: b.in.Namespace, Labels: b.labels(o.owner, o.extra)}
			body := o.body
			if body == nil {
				body = map[string]any{"spec": o.spec}
			}
			cm.Manifests = append(cm.Manifests, kube.Manifest(o.apiVersion, o.kind, meta, body))
		}
		out = append(out, cm)
	}
	return out
}

// allowPolicy is an ALLOW AuthorizationPolicy on app's pods: from the
// principals, to port.
func allowPolicy(o owner, name, app string, principals []string, port int32) *object {
	ps := make([]any, len(principals))
	for i, p := range principals {
		ps[i] = p
	}
	return &object{apiVersion: securityV1, kind: "AuthorizationPolicy", name: name, rank: rankAllow, owner: o,
		spec: map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{AppLabel: app}},
			"action":   "ALLOW",
			"rules": []any{map[string]any{
				"from": []any{map[string]any{"source": map[string]any{"principals": ps}}},
				"to":   []any{map[string]any{"operation": map[string]any{"ports": []any{itoa(port)}}}},
			}},
		}}
}

// appendNew appends the values of add that s does not hold yet.
func appendNew(s []string, add ...string) []string {
	for _, v := range add {
		if !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	return s
}
