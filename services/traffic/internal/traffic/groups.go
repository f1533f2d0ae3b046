package traffic

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/rollout"
	"github.com/dcm-project/dcm/platform/store"
)

// Groups is the part that owns the traffic intent groups: their create,
// read, update and delete (a delete removes the group's intents of every
// kind), what core's internal RPCs do to them (Load, SetApplied,
// PurgeLogicalCloud), and the parent check against the logical clouds'
// facts.
type Groups struct {
	groups *store.Records[*trafficv1.TrafficIntentGroup]
	// clouds are the logical clouds as core told them
	// (PutLogicalCloudFacts): a group's logical cloud must be one of its
	// project's (the create's parent check). The service never calls core.
	clouds *facts.Facts
	// intents and dnsIntents are the five kinds' collections: a group's
	// removal deletes under it, Load reads them.
	intents    *Intents
	dnsIntents *DNSIntents
}

// cloudExists is the group create's parent check: the logical cloud must be
// one of the URL's project (looked up there only, so a group never targets
// another project's logical cloud). A group that names none yet needs a
// project the service knows, one with a logical cloud: the service knows
// projects only through their logical clouds, and a group applies to one.
func (s *Groups) cloudExists(project, lc string) func(context.Context) error {
	return func(ctx context.Context) error {
		if lc == "" {
			known, err := s.clouds.HasAny(ctx, project)
			if err == nil && !known {
				err = errs.NotFound("project %q has no logical cloud (or does not exist): a traffic intent group applies to one of its logical clouds", project)
			}
			return err
		}
		_, err := s.clouds.Parent(ctx, project, lc)
		if errs.Code(err) == codes.NotFound {
			return errs.Invalid("traffic_intent_group.logical-cloud", "%q is not a logical cloud of project %q", lc, project)
		}
		return err
	}
}

// CreateTrafficIntentGroup implements trafficv1.TrafficServiceServer.
func (s *Groups) CreateTrafficIntentGroup(ctx context.Context, req *trafficv1.CreateTrafficIntentGroupRequest) (*trafficv1.CreateTrafficIntentGroupResponse, error) {
	g, err := checkGroup("traffic_intent_group.", req.GetTrafficIntentGroup())
	if err != nil {
		return nil, err
	}
	if g.GetName() == "" {
		return nil, errs.Invalid("traffic_intent_group.name", "is required (or metadata.name)")
	}
	parent := parentOf(req)
	err = s.groups.CreateChecked(ctx, store.Key(parent, g.GetName()), parent, g, s.cloudExists(req.GetProject(), g.GetLogicalCloud()))
	if err != nil {
		return nil, err
	}
	return &trafficv1.CreateTrafficIntentGroupResponse{TrafficIntentGroup: g}, nil
}

// GetTrafficIntentGroup implements trafficv1.TrafficServiceServer.
func (s *Groups) GetTrafficIntentGroup(ctx context.Context, req *trafficv1.GetTrafficIntentGroupRequest) (*trafficv1.GetTrafficIntentGroupResponse, error) {
	g, err := s.groups.Get(ctx, store.Key(parentOf(req), req.GetName()))
	if err != nil {
		return nil, err
	}
	return &trafficv1.GetTrafficIntentGroupResponse{TrafficIntentGroup: g.Msg}, nil
}

// ListTrafficIntentGroups implements trafficv1.TrafficServiceServer.
func (s *Groups) ListTrafficIntentGroups(ctx context.Context, req *trafficv1.ListTrafficIntentGroupsRequest) (*trafficv1.ListTrafficIntentGroupsResponse, error) {
	gs, next, err := s.groups.ListPage(ctx, parentOf(req), store.PageOf(req))
	if err != nil {
		return nil, err
	}
	return &trafficv1.ListTrafficIntentGroupsResponse{TrafficIntentGroups: gs, NextPageToken: next}, nil
}

// UpdateTrafficIntentGroup implements trafficv1.TrafficServiceServer: only
// the description and the rollout strategy change (and the logical cloud,
// once, if it was left out).
func (s *Groups) UpdateTrafficIntentGroup(ctx context.Context, req *trafficv1.UpdateTrafficIntentGroupRequest) (*trafficv1.UpdateTrafficIntentGroupResponse, error) {
	const f = "traffic_intent_group."
	in := req.GetTrafficIntentGroup()
	name, err := either(f, "name", in.GetName(), in.GetMetadata().GetName())
	if err != nil {
		return nil, err
	}
	desc, err := either(f, "description", in.GetDescription(), in.GetMetadata().GetDescription())
	if err != nil {
		return nil, err
	}
	if name != "" && name != req.GetName() {
		return nil, errs.Invalid(f+"name", "%q is not the URL's name %q: a group cannot be renamed", name, req.GetName())
	}
	id := store.Key(parentOf(req), req.GetName())
	cur, err := s.groups.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	g := cur.Msg
	switch lc := in.GetLogicalCloud(); {
	case lc == "" || lc == g.GetLogicalCloud():
	case g.GetLogicalCloud() == "":
		// Created without one (seed 004's body): set once, here.
		if err := s.cloudExists(req.GetProject(), lc)(ctx); err != nil {
			return nil, err
		}
		g.LogicalCloud = lc
	default:
		return nil, errs.Invalid(f+"logical-cloud", "%q is not the group's logical cloud %q: it never changes once set", lc, g.GetLogicalCloud())
	}
	g.Description = desc
	if r := in.GetRollout(); r != nil {
		// Given, it replaces the group's; the next apply or update follows
		// it (docs/fleet.md, "Staged rollouts").
		if err := rollout.Check(f+"rollout", r); err != nil {
			return nil, err
		}
		g.Rollout = r
	}
	g.Metadata = metadataOf(g)
	if err := s.groups.Update(ctx, id, cur.Version, g); err != nil {
		return nil, err
	}
	return &trafficv1.UpdateTrafficIntentGroupResponse{TrafficIntentGroup: g}, nil
}

// DeleteTrafficIntentGroup implements trafficv1.TrafficServiceServer. The
// group is marked first, so no intent create can slip in after its intents
// are removed (an intent create checks its group after inserting).
func (s *Groups) DeleteTrafficIntentGroup(ctx context.Context, req *trafficv1.DeleteTrafficIntentGroupRequest) (*trafficv1.DeleteTrafficIntentGroupResponse, error) {
	id := store.Key(parentOf(req), req.GetName())
	cur, err := s.groups.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if cur.Msg.GetApplied() {
		return nil, errs.Because(errs.ReasonWrongState, "traffic intent group %q is applied: terminate it first", req.GetName())
	}
	g, err := s.groups.MarkDeleting(ctx, id)
	if err != nil {
		return nil, err
	}
	// The removal must finish even if the caller has gone away.
	bg := context.WithoutCancel(ctx)
	if g.GetApplied() {
		return nil, errors.Join(errs.Because(errs.ReasonWrongState, "traffic intent group %q is applied: terminate it first", req.GetName()), s.groups.Unmark(bg, id))
	}
	if err := s.removeMarked(bg, id); err != nil {
		// Unmarked, the group can be deleted again; its intents removed so far stay removed.
		return nil, errors.Join(err, s.groups.Unmark(bg, id))
	}
	return &trafficv1.DeleteTrafficIntentGroupResponse{}, nil
}

// removeMarked removes group id, marked for deletion, with its intents of
// every kind; the group's record goes last.
func (s *Groups) removeMarked(ctx context.Context, id string) error {
	for _, under := range []func(context.Context, string) (int64, error){
		s.intents.intercluster.recs.DeleteUnder, s.intents.intracluster.recs.DeleteUnder, s.intents.outbound.recs.DeleteUnder,
		s.intents.inbound.recs.DeleteUnder, s.dnsIntents.dns.recs.DeleteUnder,
	} {
		if _, err := under(ctx, id); err != nil {
			return err
		}
	}
	return s.groups.Delete(ctx, id)
}

// PurgeLogicalCloud removes every traffic intent group of logical cloud lc
// of project with its intents (core is deleting the logical cloud, which
// it does only once no group is applied to it), and reports how many went.
// release runs first for each group (its DNS runs). A group marked by a
// removal that stopped half way is finished; rerunning it is harmless.
func (s *Groups) PurgeLogicalCloud(ctx context.Context, project, lc string, release func(ctx context.Context, id string) error) (int64, error) {
	groups, err := s.groups.Match(ctx, map[string]string{"logical_cloud": lc})
	if err != nil {
		return 0, err
	}
	var n int64
	for _, g := range groups {
		if p, _, _ := strings.Cut(g.Parent, "/"); p != project {
			continue
		}
		if err := release(ctx, g.ID); err != nil {
			return n, err
		}
		if !g.Deleting {
			if _, err := s.groups.MarkDeleting(ctx, g.ID); err != nil && errs.Code(err) != codes.NotFound {
				return n, err
			}
		}
		if err := s.removeMarked(ctx, g.ID); err != nil && errs.Code(err) != codes.NotFound {
			return n, err
		}
		n++
	}
	return n, nil
}

// Loaded is a group with every intent of every kind, each list ordered by
// name; DNS provider intents carry their unsealed credentials. It is for
// the renderer and the DNS runs only, never for an answer.
type Loaded struct {
	Group                  *trafficv1.TrafficIntentGroup
	Intercluster           []*trafficv1.InterclusterIntent
	Intracluster, Outbound []*trafficv1.ConnectivityIntent
	Inbound                []*trafficv1.ConnectivityIntent
	DNS                    []*trafficv1.DnsProviderIntent
}

// Load reads a group and all its intents.
func (s *Groups) Load(ctx context.Context, project, rb, version, group string) (*Loaded, error) {
	id := store.Key(project, rb, version, group)
	g, err := s.groups.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &Loaded{Group: g.Msg}
	if out.Intercluster, err = s.intents.intercluster.recs.List(ctx, id); err != nil {
		return nil, err
	}
	for _, l := range []struct {
		to *[]*trafficv1.ConnectivityIntent
		in *intents[*trafficv1.ConnectivityIntent]
	}{{&out.Intracluster, s.intents.intracluster}, {&out.Outbound, s.intents.outbound}, {&out.Inbound, s.intents.inbound}} {
		if *l.to, err = l.in.recs.List(ctx, id); err != nil {
			return nil, err
		}
	}
	if out.DNS, err = s.dnsIntents.dns.recs.List(ctx, id); err != nil {
		return nil, err
	}
	for _, d := range out.DNS {
		creds, err := s.credentials(ctx, store.Key(id, d.GetName()))
		if err != nil {
			return nil, err
		}
		for _, p := range d.GetDnsProvider() {
			if c := creds[p.GetId()]; len(c) > 0 {
				p.ProviderCredentials = c
			}
		}
	}
	return out, nil
}

// SetApplied records whether the group's objects are on the clusters,
// conditionally on the version read, retrying a few times when another
// writer got there first.
func (s *Groups) SetApplied(ctx context.Context, project, rb, version, group string, applied bool) error {
	id := store.Key(project, rb, version, group)
	var err error
	for range 5 {
		var cur store.Versioned[*trafficv1.TrafficIntentGroup]
		if cur, err = s.groups.Get(ctx, id); err != nil {
			return err
		}
		if cur.Msg.GetApplied() == applied {
			return nil
		}
		g := proto.CloneOf(cur.Msg)
		g.Applied = applied
		if err = s.groups.Update(ctx, id, cur.Version, g); errs.Code(err) != codes.Aborted {
			return err
		}
	}
	return err
}
