package traffic

// The RPCs of four intent kinds (DNS provider intents: dns.go): each is its kind's generic operation
// (intents.go) on the request's body.

import (
	"context"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
)

// Intents is the part that serves four intent kinds: each kind's
// collection and checks (intents.go), under the groups it reads to check
// a parent. DNS provider intents are DNSIntents' (dns.go).
type Intents struct {
	intercluster *intents[*trafficv1.InterclusterIntent]
	intracluster *intents[*trafficv1.ConnectivityIntent]
	outbound     *intents[*trafficv1.ConnectivityIntent]
	inbound      *intents[*trafficv1.ConnectivityIntent]
}

// CreateInterclusterIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) CreateInterclusterIntent(ctx context.Context, req *trafficv1.CreateInterclusterIntentRequest) (*trafficv1.CreateInterclusterIntentResponse, error) {
	m, err := s.intercluster.create(ctx, req, req.GetInterclusterIntent())
	if err != nil {
		return nil, err
	}
	return &trafficv1.CreateInterclusterIntentResponse{InterclusterIntent: m}, nil
}

// GetInterclusterIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) GetInterclusterIntent(ctx context.Context, req *trafficv1.GetInterclusterIntentRequest) (*trafficv1.GetInterclusterIntentResponse, error) {
	m, err := s.intercluster.get(ctx, req)
	if err != nil {
		return nil, err
	}
	return &trafficv1.GetInterclusterIntentResponse{InterclusterIntent: m}, nil
}

// ListInterclusterIntents implements trafficv1.TrafficServiceServer.
func (s *Intents) ListInterclusterIntents(ctx context.Context, req *trafficv1.ListInterclusterIntentsRequest) (*trafficv1.ListInterclusterIntentsResponse, error) {
	ms, next, err := s.intercluster.list(ctx, req)
	if err != nil {
		return nil, err
	}
	return &trafficv1.ListInterclusterIntentsResponse{InterclusterIntents: ms, NextPageToken: next}, nil
}

// UpdateInterclusterIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) UpdateInterclusterIntent(ctx context.Context, req *trafficv1.UpdateInterclusterIntentRequest) (*trafficv1.UpdateInterclusterIntentResponse, error) {
	m, err := s.intercluster.update(ctx, req, req.GetInterclusterIntent())
	if err != nil {
		return nil, err
	}
	return &trafficv1.UpdateInterclusterIntentResponse{InterclusterIntent: m}, nil
}

// DeleteInterclusterIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) DeleteInterclusterIntent(ctx context.Context, req *trafficv1.DeleteInterclusterIntentRequest) (*trafficv1.DeleteInterclusterIntentResponse, error) {
	if err := s.intercluster.delete(ctx, req); err != nil {
		return nil, err
	}
	return &trafficv1.DeleteInterclusterIntentResponse{}, nil
}

// CreateIntraclusterIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) CreateIntraclusterIntent(ctx context.Context, req *trafficv1.CreateIntraclusterIntentRequest) (*trafficv1.CreateIntraclusterIntentResponse, error) {
	m, err := s.intracluster.create(ctx, req, req.GetIntraclusterIntent())
	if err != nil {
		return nil, err
	}
	return &trafficv1.CreateIntraclusterIntentResponse{IntraclusterIntent: m}, nil
}

// GetIntraclusterIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) GetIntraclusterIntent(ctx context.Context, req *trafficv1.GetIntraclusterIntentRequest) (*trafficv1.GetIntraclusterIntentResponse, error) {
	m, err := s.intracluster.get(ctx, req)
	if err != nil {
		return nil, err
	}
	return &trafficv1.GetIntraclusterIntentResponse{IntraclusterIntent: m}, nil
}

// ListIntraclusterIntents implements trafficv1.TrafficServiceServer.
func (s *Intents) ListIntraclusterIntents(ctx context.Context, req *trafficv1.ListIntraclusterIntentsRequest) (*trafficv1.ListIntraclusterIntentsResponse, error) {
	ms, next, err := s.intracluster.list(ctx, req)
	if err != nil {
		return nil, err
	}
	return &trafficv1.ListIntraclusterIntentsResponse{IntraclusterIntents: ms, NextPageToken: next}, nil
}

// UpdateIntraclusterIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) UpdateIntraclusterIntent(ctx context.Context, req *trafficv1.UpdateIntraclusterIntentRequest) (*trafficv1.UpdateIntraclusterIntentResponse, error) {
	m, err := s.intracluster.update(ctx, req, req.GetIntraclusterIntent())
	if err != nil {
		return nil, err
	}
	return &trafficv1.UpdateIntraclusterIntentResponse{IntraclusterIntent: m}, nil
}

// DeleteIntraclusterIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) DeleteIntraclusterIntent(ctx context.Context, req *trafficv1.DeleteIntraclusterIntentRequest) (*trafficv1.DeleteIntraclusterIntentResponse, error) {
	if err := s.intracluster.delete(ctx, req); err != nil {
		return nil, err
	}
	return &trafficv1.DeleteIntraclusterIntentResponse{}, nil
}

// CreateExternalOutboundIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) CreateExternalOutboundIntent(ctx context.Context, req *trafficv1.CreateExternalOutboundIntentRequest) (*trafficv1.CreateExternalOutboundIntentResponse, error) {
	m, err := s.outbound.create(ctx, req, req.GetExternalOutboundIntent())
	if err != nil {
		return nil, err
	}
	return &trafficv1.CreateExternalOutboundIntentResponse{ExternalOutboundIntent: m}, nil
}

// GetExternalOutboundIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) GetExternalOutboundIntent(ctx context.Context, req *trafficv1.GetExternalOutboundIntentRequest) (*trafficv1.GetExternalOutboundIntentResponse, error) {
	m, err := s.outbound.get(ctx, req)
	if err != nil {
		return nil, err
	}
	return &trafficv1.GetExternalOutboundIntentResponse{ExternalOutboundIntent: m}, nil
}

// ListExternalOutboundIntents implements trafficv1.TrafficServiceServer.
func (s *Intents) ListExternalOutboundIntents(ctx context.Context, req *trafficv1.ListExternalOutboundIntentsRequest) (*trafficv1.ListExternalOutboundIntentsResponse, error) {
	ms, next, err := s.outbound.list(ctx, req)
	if err != nil {
		return nil, err
	}
	return &trafficv1.ListExternalOutboundIntentsResponse{ExternalOutboundIntents: ms, NextPageToken: next}, nil
}

// UpdateExternalOutboundIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) UpdateExternalOutboundIntent(ctx context.Context, req *trafficv1.UpdateExternalOutboundIntentRequest) (*trafficv1.UpdateExternalOutboundIntentResponse, error) {
	m, err := s.outbound.update(ctx, req, req.GetExternalOutboundIntent())
	if err != nil {
		return nil, err
	}
	return &trafficv1.UpdateExternalOutboundIntentResponse{ExternalOutboundIntent: m}, nil
}

// DeleteExternalOutboundIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) DeleteExternalOutboundIntent(ctx context.Context, req *trafficv1.DeleteExternalOutboundIntentRequest) (*trafficv1.DeleteExternalOutboundIntentResponse, error) {
	if err := s.outbound.delete(ctx, req); err != nil {
		return nil, err
	}
	return &trafficv1.DeleteExternalOutboundIntentResponse{}, nil
}

// CreateExternalInboundIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) CreateExternalInboundIntent(ctx context.Context, req *trafficv1.CreateExternalInboundIntentRequest) (*trafficv1.CreateExternalInboundIntentResponse, error) {
	m, err := s.inbound.create(ctx, req, req.GetExternalInboundIntent())
	if err != nil {
		return nil, err
	}
	return &trafficv1.CreateExternalInboundIntentResponse{ExternalInboundIntent: m}, nil
}

// GetExternalInboundIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) GetExternalInboundIntent(ctx context.Context, req *trafficv1.GetExternalInboundIntentRequest) (*trafficv1.GetExternalInboundIntentResponse, error) {
	m, err := s.inbound.get(ctx, req)
	if err != nil {
		return nil, err
	}
	return &trafficv1.GetExternalInboundIntentResponse{ExternalInboundIntent: m}, nil
}

// ListExternalInboundIntents implements trafficv1.TrafficServiceServer.
func (s *Intents) ListExternalInboundIntents(ctx context.Context, req *trafficv1.ListExternalInboundIntentsRequest) (*trafficv1.ListExternalInboundIntentsResponse, error) {
	ms, next, err := s.inbound.list(ctx, req)
	if err != nil {
		return nil, err
	}
	return &trafficv1.ListExternalInboundIntentsResponse{ExternalInboundIntents: ms, NextPageToken: next}, nil
}

// UpdateExternalInboundIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) UpdateExternalInboundIntent(ctx context.Context, req *trafficv1.UpdateExternalInboundIntentRequest) (*trafficv1.UpdateExternalInboundIntentResponse, error) {
	m, err := s.inbound.update(ctx, req, req.GetExternalInboundIntent())
	if err != nil {
		return nil, err
	}
	return &trafficv1.UpdateExternalInboundIntentResponse{ExternalInboundIntent: m}, nil
}

// DeleteExternalInboundIntent implements trafficv1.TrafficServiceServer.
func (s *Intents) DeleteExternalInboundIntent(ctx context.Context, req *trafficv1.DeleteExternalInboundIntentRequest) (*trafficv1.DeleteExternalInboundIntentResponse, error) {
	if err := s.inbound.delete(ctx, req); err != nil {
		return nil, err
	}
	return &trafficv1.DeleteExternalInboundIntentResponse{}, nil
}
