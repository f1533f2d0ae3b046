package traffic

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/traffic/internal/dns"
)

// AllowLists is the part that serves the DNS allow-list routes
// (docs/traffic.md "DNS allow-list"): the gateway lets a project's members
// reach them; writing is decided here, for admins only, as core decides
// admin-only levels. It also checks a DNS provider intent against its
// project's list (bindDNS).
type AllowLists struct {
	// allow are the projects' DNS allow-lists (the DNS runs read them too).
	allow *dns.AllowLists
}

// GetDnsAllowList implements trafficv1.TrafficServiceServer.
func (s *AllowLists) GetDnsAllowList(ctx context.Context, req *trafficv1.GetDnsAllowListRequest) (*trafficv1.GetDnsAllowListResponse, error) {
	m, err := s.allow.Get(ctx, req.GetProject())
	if err != nil {
		return nil, err
	}
	return &trafficv1.GetDnsAllowListResponse{DnsAllowList: m}, nil
}

// PutDnsAllowList implements trafficv1.TrafficServiceServer.
func (s *AllowLists) PutDnsAllowList(ctx context.Context, req *trafficv1.PutDnsAllowListRequest) (*trafficv1.PutDnsAllowListResponse, error) {
	if !server.MayGrant(ctx) {
		return nil, errs.Forbidden("", "only an admin sets a project's DNS allow-list: it says which DNS servers and zones the project may change")
	}
	m, err := s.allow.Put(ctx, "dns_allow_list.", req.GetProject(), req.GetDnsAllowList())
	if err != nil {
		return nil, err
	}
	return &trafficv1.PutDnsAllowListResponse{DnsAllowList: m}, nil
}

// DeleteDnsAllowList implements trafficv1.TrafficServiceServer.
func (s *AllowLists) DeleteDnsAllowList(ctx context.Context, req *trafficv1.DeleteDnsAllowListRequest) (*trafficv1.DeleteDnsAllowListResponse, error) {
	if !server.MayGrant(ctx) {
		return nil, errs.Forbidden("", "only an admin removes a project's DNS allow-list")
	}
	if err := s.allow.Delete(ctx, req.GetProject()); err != nil {
		return nil, err
	}
	return &trafficv1.DeleteDnsAllowListResponse{}, nil
}

// bindDNS is a DNS provider intent's checks that need its place and its
// caller (id is the intent's store key: project/rb/version/group/name):
//   - txt-owner-id is derived from the project, group, intent and entry
//     (dns.OwnerID): another value is refused, and the stored intent (and
//     so the answer) shows the derived one;
//   - rfc2136-insecure true (unsigned updates) is for admins only;
//   - every entry's servers, zones and names must be on the project's
//     DNS allow-list.
func (s *AllowLists) bindDNS(ctx context.Context, field, id string, m *trafficv1.DnsProviderIntent) error {
	group, _ := cutLast(id)
	project, _, _ := strings.Cut(id, "/")
	al, err := s.allow.Of(ctx, project)
	if err != nil {
		return err
	}
	for i, d := range m.GetDnsProvider() {
		f := fmt.Sprintf("%sdnsProvider[%d].", field, i)
		params := maps.Clone(d.GetExternalDnsParameters())
		if params == nil {
			params = map[string]string{}
		}
		owner := dns.OwnerID(group, m.GetName(), d.GetId())
		if o, ok := params["txt-owner-id"]; ok && o != owner {
			return errs.Invalid(f+"externalDnsParameters.txt-owner-id",
				"is derived from the project, the traffic intent group, the intent and the entry's id: this entry's is %s; give that or none", owner)
		}
		params["txt-owner-id"] = owner
		if b, _ := strconv.ParseBool(params["rfc2136-insecure"]); b && !server.MayGrant(ctx) {
			return errs.Forbidden(f+"externalDnsParameters.rfc2136-insecure",
				"only an admin may turn TSIG off: unsigned updates are accepted by a DNS server from anyone who can reach it")
		}
		if err := al.Check(f, d.GetExternalName(), params); err != nil {
			return err
		}
		d.ExternalDnsParameters = params
	}
	return nil
}

// cutLast splits a store key before its last name.
func cutLast(id string) (string, string) {
	i := strings.LastIndex(id, "/")
	if i < 0 {
		return "", id
	}
	return id[:i], id[i+1:]
}
