// Package traffic implements the traffic controller. This version holds
// traffic intent groups; intents and their Istio resources come later.
package traffic

import (
	"context"

	"google.golang.org/grpc"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/store"
)

// Service is the traffic controller's gRPC API.
type Service struct {
	trafficv1.UnimplementedTrafficServiceServer
	groups *store.Records[*trafficv1.TrafficIntentGroup]
}

// New opens the service's collections on st.
func New(st *store.Store) *Service {
	return &Service{groups: store.NewRecords(st, "traffic_intent_groups", "traffic intent group",
		func() *trafficv1.TrafficIntentGroup { return &trafficv1.TrafficIntentGroup{} })}
}

// Register serves the API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) { trafficv1.RegisterTrafficServiceServer(r, s) }

type appVersion interface {
	GetProject() string
	GetCompositeApp() string
	GetVersion() string
}

func parentOf(r appVersion) string {
	return store.Key(r.GetProject(), r.GetCompositeApp(), r.GetVersion())
}

// CreateTrafficIntentGroup implements trafficv1.TrafficServiceServer.
func (s *Service) CreateTrafficIntentGroup(ctx context.Context, req *trafficv1.CreateTrafficIntentGroupRequest) (*trafficv1.CreateTrafficIntentGroupResponse, error) {
	g := req.GetTrafficIntentGroup()
	if err := s.groups.Create(ctx, store.Key(parentOf(req), g.GetMetadata().GetName()), parentOf(req), g); err != nil {
		return nil, err
	}
	return &trafficv1.CreateTrafficIntentGroupResponse{TrafficIntentGroup: g}, nil
}

// GetTrafficIntentGroup implements trafficv1.TrafficServiceServer.
func (s *Service) GetTrafficIntentGroup(ctx context.Context, req *trafficv1.GetTrafficIntentGroupRequest) (*trafficv1.GetTrafficIntentGroupResponse, error) {
	g, err := s.groups.Get(ctx, store.Key(parentOf(req), req.GetName()))
	if err != nil {
		return nil, err
	}
	return &trafficv1.GetTrafficIntentGroupResponse{TrafficIntentGroup: g.Msg}, nil
}

// ListTrafficIntentGroups implements trafficv1.TrafficServiceServer.
func (s *Service) ListTrafficIntentGroups(ctx context.Context, req *trafficv1.ListTrafficIntentGroupsRequest) (*trafficv1.ListTrafficIntentGroupsResponse, error) {
	gs, next, err := s.groups.ListPage(ctx, parentOf(req), store.PageOf(req))
	if err != nil {
		return nil, err
	}
	return &trafficv1.ListTrafficIntentGroupsResponse{TrafficIntentGroups: gs, NextPageToken: next}, nil
}

// DeleteTrafficIntentGroup implements trafficv1.TrafficServiceServer.
func (s *Service) DeleteTrafficIntentGroup(ctx context.Context, req *trafficv1.DeleteTrafficIntentGroupRequest) (*trafficv1.DeleteTrafficIntentGroupResponse, error) {
	if err := s.groups.Delete(ctx, store.Key(parentOf(req), req.GetName())); err != nil {
		return nil, err
	}
	return &trafficv1.DeleteTrafficIntentGroupResponse{}, nil
}
