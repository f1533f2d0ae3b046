package traffic

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/traffic/internal/dns"
	"github.com/dcm-project/dcm/services/traffic/internal/render"
)

// Internal is the internal API (TrafficInternalService) over the same
// records: what core tells at apply, update and terminate, and the DNS
// runs' status it reads back.
type Internal struct {
	trafficv1.UnimplementedTrafficInternalServiceServer
	// groups loads a group with its intents, records it applied or not,
	// and purges a logical cloud's groups.
	groups *Groups
	// allow are the projects' DNS allow-lists, checked again at render.
	allow *dns.AllowLists
	dns   *dns.Controller
}

// Internal serves the internal API over s's records, keeping d's DNS runs
// in step with what is applied.
func (s *Service) Internal(d *dns.Controller) *Internal {
	return &Internal{groups: s.Groups, allow: s.allow, dns: d}
}

// Register serves the internal API on r.
func (i *Internal) Register(r grpc.ServiceRegistrar) {
	trafficv1.RegisterTrafficInternalServiceServer(r, i)
}

// RenderTrafficIntentGroup implements trafficv1.TrafficInternalServiceServer.
func (i *Internal) RenderTrafficIntentGroup(ctx context.Context, req *trafficv1.RenderTrafficIntentGroupRequest) (*trafficv1.RenderTrafficIntentGroupResponse, error) {
	l, err := i.groups.Load(ctx, req.GetProject(), req.GetCompositeApp(), req.GetVersion(), req.GetGroup())
	if err != nil {
		return nil, err
	}
	if lc := l.Group.GetLogicalCloud(); lc != req.GetLogicalCloud() {
		return nil, errs.FailedPrecondition("traffic intent group %q is for logical cloud %q, not %q", req.GetGroup(), lc, req.GetLogicalCloud())
	}
	in := render.Input{
		Project: req.GetProject(), CompositeApp: req.GetCompositeApp(), Version: req.GetVersion(), Group: req.GetGroup(),
		LogicalCloud: req.GetLogicalCloud(), Namespace: req.GetNamespace(), IstioNamespace: req.GetIstioNamespace(),
		Revision:     req.GetRevision(),
		Intercluster: l.Intercluster, Intracluster: l.Intracluster, Outbound: l.Outbound, Inbound: l.Inbound, DNS: l.DNS,
	}
	for _, c := range req.GetClusters() {
		in.Clusters = append(in.Clusters, render.Target{Provider: c.GetProvider(), Cluster: c.GetCluster(),
			Labels: c.GetLabels(), Address: c.GetLoadbalancerIp()})
	}
	clusters, runs, err := render.Render(in)
	if err != nil {
		return nil, err
	}
	group := groupKey(req)
	dr := dnsRuns(group, l.DNS, runs)
	// The project's DNS allow-list as it is now: an intent stored under a
	// wider one is not applied once an admin narrowed it.
	if len(dr) > 0 {
		al, err := i.allow.Of(ctx, req.GetProject())
		if err != nil {
			return nil, err
		}
		for _, r := range dr {
			if err := al.Check(fmt.Sprintf("dnsproviders/%s: dnsProvider[%s].", r.Intent, r.ID), r.ExternalName, r.Params); err != nil {
				return nil, err
			}
		}
	}
	if err := i.dns.Set(ctx, group, dr); err != nil {
		return nil, err
	}
	if err := i.groups.SetApplied(ctx, req.GetProject(), req.GetCompositeApp(), req.GetVersion(), req.GetGroup(), true); err != nil {
		return nil, err
	}
	resp := &trafficv1.RenderTrafficIntentGroupResponse{}
	sum := sha256.New()
	for _, c := range clusters {
		for _, m := range c.Manifests {
			sum.Write([]byte(m))
		}
		resp.Clusters = append(resp.Clusters, &trafficv1.TrafficManifests{Provider: c.Provider, Cluster: c.Cluster, Manifests: c.Manifests})
	}
	resp.Digest = hex.EncodeToString(sum.Sum(nil))
	return resp, nil
}

// dnsRuns are the external-dns runs of what render published, with each
// entry's parameters and credentials.
func dnsRuns(group string, intents []*trafficv1.DnsProviderIntent, published []render.DNSRun) []dns.Run {
	entries := map[string]*trafficv1.DnsProvider{}
	for _, in := range intents {
		for _, e := range in.GetDnsProvider() {
			entries[store.Key(in.GetName(), e.GetId())] = e
		}
	}
	out := make([]dns.Run, 0, len(published))
	for _, p := range published {
		e := entries[store.Key(p.Intent, p.ID)]
		// The owner id is the run's own (dns.OwnerID): a txt-owner-id an
		// intent stored before it was derived is not passed on.
		params := maps.Clone(e.GetExternalDnsParameters())
		delete(params, "txt-owner-id")
		run := dns.Run{Group: group, Intent: p.Intent, ID: p.ID, ExternalName: p.ExternalName, Provider: p.Provider,
			Params: params, Credentials: e.GetProviderCredentials(), Selector: p.Selector}
		for _, c := range p.Clusters {
			run.Clusters = append(run.Clusters, dns.Cluster{Provider: c.Provider, Cluster: c.Cluster,
				Namespace: p.Namespace, ServiceAccount: p.ServiceAccount})
		}
		out = append(out, run)
	}
	return out
}

// ReleaseTrafficIntentGroup implements trafficv1.TrafficInternalServiceServer.
func (i *Internal) ReleaseTrafficIntentGroup(ctx context.Context, req *trafficv1.ReleaseTrafficIntentGroupRequest) (*trafficv1.ReleaseTrafficIntentGroupResponse, error) {
	if err := i.dns.Release(ctx, groupKey(req)); err != nil {
		return nil, err
	}
	err := i.groups.SetApplied(ctx, req.GetProject(), req.GetCompositeApp(), req.GetVersion(), req.GetGroup(), false)
	if err != nil && errs.Code(err) != codes.NotFound {
		return nil, err
	}
	return &trafficv1.ReleaseTrafficIntentGroupResponse{}, nil
}

// PurgeLogicalCloud implements trafficv1.TrafficInternalServiceServer: the
// groups of a logical cloud core is deleting go, with their intents and
// DNS runs (core's cascade, as for the namespace, user and quota
// services).
func (i *Internal) PurgeLogicalCloud(ctx context.Context, req *trafficv1.PurgeLogicalCloudRequest) (*trafficv1.PurgeLogicalCloudResponse, error) {
	n, err := i.groups.PurgeLogicalCloud(ctx, req.GetProject(), req.GetLogicalCloud(), i.dns.Release)
	if err != nil {
		return nil, err
	}
	return &trafficv1.PurgeLogicalCloudResponse{Removed: n}, nil
}

// GetTrafficDnsStatus implements trafficv1.TrafficInternalServiceServer.
func (i *Internal) GetTrafficDnsStatus(ctx context.Context, req *trafficv1.GetTrafficDnsStatusRequest) (*trafficv1.GetTrafficDnsStatusResponse, error) {
	runs, err := i.dns.Status(ctx, groupKey(req))
	if err != nil {
		return nil, err
	}
	return &trafficv1.GetTrafficDnsStatusResponse{Runs: runs}, nil
}
