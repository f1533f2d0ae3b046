// Package traffic implements the traffic controller's public API: traffic
// intent groups and, in each, five kinds of intents (docs/traffic.md).
package traffic

import (
	"google.golang.org/grpc"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/traffic/internal/dns"
)

// Service is the traffic controller's gRPC API: a thin type composed of
// the parts that each do one job, with only the collections and settings
// that job uses (docs/traffic.md, "Parts"). The gRPC methods are the
// parts' own, promoted:
//
//   - Groups: create, read, update and delete of traffic intent groups,
//     and what core's internal RPCs do to them (groups.go);
//   - Intents: the RPCs of four intent kinds (rpcs.go, intents.go);
//   - DNSIntents: the RPCs of DNS provider intents (dns.go);
//   - AllowLists: the projects' DNS allow-lists (allowlist.go).
//
// Internal (internal.go) is the internal API, a gRPC service of its own.
type Service struct {
	unimplemented
	*Groups
	*Intents
	*DNSIntents
	*AllowLists
}

// unimplemented answers the RPCs no part serves; one level down, so that
// the parts' methods, one level up, win.
type unimplemented struct {
	trafficv1.UnimplementedTrafficServiceServer
}

// New opens the service's collections on st, its copy of the logical
// clouds' facts among them, and wires the parts.
func New(st *store.Store) *Service {
	allow := &AllowLists{allow: dns.NewAllowLists(st)}
	groups := store.NewRecords(st, IntentGroupsCollection, "traffic intent group",
		func() *trafficv1.TrafficIntentGroup { return &trafficv1.TrafficIntentGroup{} })
	conn := func(coll, what, field string, k kind) *intents[*trafficv1.ConnectivityIntent] {
		return &intents[*trafficv1.ConnectivityIntent]{
			recs:   store.NewRecords(st, coll, what, func() *trafficv1.ConnectivityIntent { return &trafficv1.ConnectivityIntent{} }),
			field:  field,
			check:  func(f string, m *trafficv1.ConnectivityIntent) error { return checkConnectivity(f, k, m) },
			defalt: firstResourceID,
			groups: groups,
		}
	}
	in := &Intents{}
	in.intercluster = &intents[*trafficv1.InterclusterIntent]{
		recs: store.NewRecords(st, InterclusterIntentsCollection, "inter-cluster intent",
			func() *trafficv1.InterclusterIntent { return &trafficv1.InterclusterIntent{} }),
		field:  "intercluster_intent",
		check:  checkIntercluster,
		defalt: func(m *trafficv1.InterclusterIntent) string { return m.GetInboundServiceName() },
		groups: groups,
	}
	in.intracluster = conn(IntraclusterIntentsCollection, "intra-cluster intent", "intracluster_intent", kindIntracluster)
	in.outbound = conn(ExternalOutboundIntentsCollection, "external outbound intent", "external_outbound_intent", kindOutbound)
	in.inbound = conn(ExternalInboundIntentsCollection, "external inbound intent", "external_inbound_intent", kindInbound)
	dnsIntents := &DNSIntents{}
	dnsIntents.dns = &intents[*trafficv1.DnsProviderIntent]{
		recs: store.NewRecords(st, DNSProviderIntentsCollection, "DNS provider intent",
			func() *trafficv1.DnsProviderIntent { return &trafficv1.DnsProviderIntent{} }),
		field: "dns_provider_intent",
		check: checkDNS,
		defalt: func(m *trafficv1.DnsProviderIntent) string {
			if len(m.GetDnsProvider()) == 0 {
				return ""
			}
			return m.GetDnsProvider()[0].GetId()
		},
		bind:   allow.bindDNS,
		seal:   sealCredentials,
		groups: groups,
	}
	return &Service{
		Groups:     &Groups{groups: groups, clouds: facts.Open(st, "traffic"), intents: in, dnsIntents: dnsIntents},
		Intents:    in,
		DNSIntents: dnsIntents,
		AllowLists: allow,
	}
}

// Facts is the service's copy of the logical clouds' facts, which core
// tells it through the facts contract (platform/facts.Serve).
func (s *Service) Facts() *facts.Facts { return s.clouds }

// Register serves the API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) { trafficv1.RegisterTrafficServiceServer(r, s) }

// appVersion is what every request names: the composite application version.
type appVersion interface {
	GetProject() string
	GetCompositeApp() string
	GetVersion() string
}

func parentOf(r appVersion) string {
	return store.Key(r.GetProject(), r.GetCompositeApp(), r.GetVersion())
}

func firstResourceID(m *trafficv1.ConnectivityIntent) string {
	if len(m.GetConnectivityResource()) == 0 {
		return ""
	}
	return m.GetConnectivityResource()[0].GetId()
}

func metadataOf(g *trafficv1.TrafficIntentGroup) *typesv1.Metadata {
	return &typesv1.Metadata{Name: g.GetName(), Description: g.GetDescription()}
}
