package dns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/netcheck"
	"github.com/dcm-project/dcm/platform/store"
)

// The DNS allow-list (docs/traffic.md "DNS allow-list"): per project, the
// rfc2136 servers (host:port) and zones an operator lets its DNS provider
// intents use, and the non-public networks those servers may be at. A
// project without one may use no DNS server. It is checked when an intent
// is stored, when its group is applied and before every pass (before
// anything is dialed), so narrowing it stops runs already applied.

// AllowLists are the projects' allow-lists in the store.
type AllowLists struct {
	recs *store.Records[*trafficv1.DnsAllowList]
}

// NewAllowLists opens the allow-lists on st.
func NewAllowLists(st *store.Store) *AllowLists {
	return &AllowLists{recs: store.NewRecords(st, AllowListCollection, "DNS allow-list",
		func() *trafficv1.DnsAllowList { return &trafficv1.DnsAllowList{} })}
}

// Get reads a project's allow-list, with its version in resourceVersion;
// NotFound when it has none.
func (a *AllowLists) Get(ctx context.Context, project string) (*trafficv1.DnsAllowList, error) {
	v, err := a.recs.Get(ctx, project)
	if err != nil {
		return nil, err
	}
	v.Msg.ResourceVersion = strconv.FormatInt(v.Version, 10)
	return v.Msg, nil
}

// Of is a project's allow-list for the checks: the empty list (nothing
// allowed) when it has none.
func (a *AllowLists) Of(ctx context.Context, project string) (*AllowList, error) {
	m, err := a.Get(ctx, project)
	if errs.Code(err) == codes.NotFound {
		return &AllowList{Project: project}, nil
	}
	if err != nil {
		return nil, err
	}
	l, err := parseAllowList("", m)
	if err != nil {
		return nil, errs.Internal(err, "stored DNS allow-list of %q does not parse", project)
	}
	l.Project = project
	return l, nil
}

// Put replaces a project's allow-list (checked and normalized first). A
// resourceVersion given must be the stored version: a concurrent change
// is CONCURRENT_UPDATE, as is a create racing another.
func (a *AllowLists) Put(ctx context.Context, field, project string, m *trafficv1.DnsAllowList) (*trafficv1.DnsAllowList, error) {
	l, err := parseAllowList(field, m)
	if err != nil {
		return nil, err
	}
	out := l.message()
	cur, err := a.recs.Get(ctx, project)
	switch {
	case errs.Code(err) == codes.NotFound:
		if rv := m.GetResourceVersion(); rv != "" {
			return nil, errs.Because(errs.ReasonConcurrentUpdate, "the DNS allow-list of project %q is gone: resourceVersion %s is not stored", project, rv)
		}
		if err := a.recs.Create(ctx, project, "", out); err != nil {
			if errs.Code(err) == codes.AlreadyExists {
				return nil, errs.Because(errs.ReasonConcurrentUpdate, "the DNS allow-list of project %q was created meanwhile: read it and try again", project)
			}
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		if rv := m.GetResourceVersion(); rv != "" && rv != strconv.FormatInt(cur.Version, 10) {
			return nil, errs.Because(errs.ReasonConcurrentUpdate, "the DNS allow-list of project %q is at resourceVersion %d, not %s: read it and try again", project, cur.Version, rv)
		}
		if err := a.recs.Update(ctx, project, cur.Version, out); err != nil {
			if errs.Code(err) == codes.Aborted {
				return nil, errs.Because(errs.ReasonConcurrentUpdate, "the DNS allow-list of project %q changed meanwhile: read it and try again", project)
			}
			return nil, err
		}
	}
	return a.Get(ctx, project)
}

// Delete removes a project's allow-list.
func (a *AllowLists) Delete(ctx context.Context, project string) error {
	return a.recs.Delete(ctx, project)
}

// AllowList is a parsed allow-list.
type AllowList struct {
	Project string
	// servers are "host:port", host lower-cased without a trailing dot.
	servers []string
	zones   []string
	// networks are the non-public prefixes admitted; literal server
	// addresses are admitted as single-address prefixes.
	networks []netip.Prefix
}

func (l *AllowList) message() *trafficv1.DnsAllowList {
	m := &trafficv1.DnsAllowList{Servers: slices.Clone(l.servers), Zones: slices.Clone(l.zones)}
	for _, p := range l.networks {
		m.Networks = append(m.Networks, p.String())
	}
	return m
}

// normHost lower-cases a host name and drops its trailing dot; an IP
// address is written in its canonical form.
func normHost(h string) string {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String()
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func parseAllowList(field string, m *trafficv1.DnsAllowList) (*AllowList, error) {
	l := &AllowList{}
	for i, s := range m.GetServers() {
		f := fmt.Sprintf("%sservers[%d]", field, i)
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return nil, errs.Invalid(f, "%q is not host:port (an IPv6 address goes in brackets)", s)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, errs.Invalid(f, "%q: the port is not 1 to 65535", s)
		}
		a, aerr := netip.ParseAddr(host)
		if aerr == nil && a.Zone() != "" {
			return nil, errs.Invalid(f, "%q: an address with a zone is not a DNS server", s)
		}
		if aerr != nil && !isHostname(strings.TrimSuffix(host, ".")) {
			return nil, errs.Invalid(f, "%q: the host is not an IP address or a host name", s)
		}
		if why := netcheck.ForbiddenHost(host); why != "" {
			return nil, errs.Invalid(f, "%q: the host %s: never a DNS server", s, why)
		}
		k := net.JoinHostPort(normHost(host), port)
		if slices.Contains(l.servers, k) {
			return nil, errs.Invalid(f, "%q is listed twice", s)
		}
		l.servers = append(l.servers, k)
		if aerr == nil {
			a = a.Unmap()
			l.networks = appendPrefix(l.networks, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	for i, z := range m.GetZones() {
		f := fmt.Sprintf("%szones[%d]", field, i)
		n := normHost(z)
		if _, err := netip.ParseAddr(n); err == nil || !isHostname(n) {
			return nil, errs.Invalid(f, "%q is not a DNS zone name", z)
		}
		if slices.Contains(l.zones, n) {
			return nil, errs.Invalid(f, "%q is listed twice", z)
		}
		l.zones = append(l.zones, n)
	}
	for i, n := range m.GetNetworks() {
		f := fmt.Sprintf("%snetworks[%d]", field, i)
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return nil, errs.Invalid(f, "%q is not a CIDR prefix (such as 10.0.0.0/24)", n)
		}
		p = p.Masked()
		if p.Addr().Is4In6() {
			p = netip.PrefixFrom(p.Addr().Unmap(), max(p.Bits()-96, 0))
		}
		if p.Bits() == 0 {
			return nil, errs.Invalid(f, "%q admits every address: list the networks the DNS servers are on", n)
		}
		if netcheck.ForbiddenHost(p.Addr().String()) != "" {
			return nil, errs.Invalid(f, "%q: link-local, unspecified, multicast and metadata addresses are never DNS servers", n)
		}
		l.networks = appendPrefix(l.networks, p)
	}
	return l, nil
}

func appendPrefix(ps []netip.Prefix, p netip.Prefix) []netip.Prefix {
	if slices.Contains(ps, p) {
		return ps
	}
	return append(ps, p)
}

// isHostname tells whether s is an RFC 1123 host name (no trailing dot).
func isHostname(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if l == "" || len(l) > 63 || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			return false
		}
		for _, r := range l {
			if !hostnameRune(r) {
				return false
			}
		}
	}
	return true
}

// hostnameRune tells whether r may stand in a host name's label.
func hostnameRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-'
}

// under tells whether name is zone or a name in it.
func under(name, zone string) bool {
	name = normHost(name)
	return name == zone || strings.HasSuffix(name, "."+zone)
}

// nonPublic says why an address is not a public unicast address ("" when
// it is one): what a DNS run never dials unless the allow-list admits it.
func nonPublic(a netip.Addr) string {
	a = a.WithZone("").Unmap()
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case a.IsPrivate():
		return "a private address"
	case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsMulticast() || a.IsInterfaceLocalMulticast():
		return "a multicast address"
	case a.Is4() && netip.MustParsePrefix("100.64.0.0/10").Contains(a):
		return "a shared (carrier-grade NAT) address"
	case a.Is4() && netip.MustParsePrefix("0.0.0.0/8").Contains(a):
		return "an address of this network (0.0.0.0/8)"
	}
	return ""
}

// Admits tells whether a run may dial a: a public address, or one in the
// allow-list's networks (literal server addresses included). Metadata and
// link-local addresses are never admitted.
func (l *AllowList) Admits(a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	if netcheck.ForbiddenHost(a.String()) != "" {
		return false
	}
	if nonPublic(a) == "" {
		return true
	}
	for _, p := range l.networks {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Check refuses an entry's parameters the allow-list does not admit,
// naming the parameter under at ("...externalDnsParameters."): each
// rfc2136-host with the port must be a listed server, each rfc2136-zone
// a listed zone or under one, the externalName and every domain-filter
// under one of the entry's zones. Nothing is resolved or dialed.
func (l *AllowList) Check(at, externalName string, params map[string]string) error {
	field := func(k string) string { return at + "externalDnsParameters." + k }
	if len(l.servers) == 0 {
		return errs.Invalid(field("rfc2136-host"), "project %q may use no DNS server: an admin lists the servers and zones it may use in its DNS allow-list (/v2/projects/%s/dns-allow-list)", l.Project, l.Project)
	}
	port := params["rfc2136-port"]
	if port == "" {
		port = "53"
	}
	for _, h := range splitList(params["rfc2136-host"]) {
		k := net.JoinHostPort(normHost(h), port)
		if !slices.Contains(l.servers, k) {
			return errs.Invalid(field("rfc2136-host"), "%s is not a DNS server of project %q's DNS allow-list (%s)", k, l.Project, strings.Join(l.servers, ", "))
		}
	}
	zones := splitList(params["rfc2136-zone"])
	for _, z := range zones {
		if !slices.ContainsFunc(l.zones, func(a string) bool { return under(z, a) }) {
			return errs.Invalid(field("rfc2136-zone"), "%s is not a zone of project %q's DNS allow-list (%s)", z, l.Project, strings.Join(l.zones, ", "))
		}
	}
	inZones := func(name string) bool {
		return slices.ContainsFunc(zones, func(z string) bool { return under(name, normHost(z)) })
	}
	if !inZones(externalName) {
		return errs.Invalid(at+"externalName", "%s is not in the entry's rfc2136-zone (%s)", externalName, strings.Join(zones, ", "))
	}
	for _, d := range splitList(params["domain-filter"]) {
		if !inZones(d) {
			return errs.Invalid(field("domain-filter"), "%s is not in the entry's rfc2136-zone (%s)", d, strings.Join(zones, ", "))
		}
	}
	return nil
}

func splitList(v string) []string {
	var l []string
	for s := range strings.SplitSeq(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			l = append(l, s)
		}
	}
	return l
}
