package rsync

import (
	"context"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// SubmitRollout implements rsyncv1.RsyncInternalServiceServer.
func (s *Service) SubmitRollout(ctx context.Context, req *rsyncv1.SubmitRolloutRequest) (*rsyncv1.SubmitRolloutResponse, error) {
	gen, err := s.engine.SubmitGuest(ctx, req.GetOwner(), req.GetHostOwner(), req.Repair, req.GetClusters())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.SubmitRolloutResponse{Generation: gen}, nil
}

// UpdateRollout implements rsyncv1.RsyncInternalServiceServer.
func (s *Service) UpdateRollout(ctx context.Context, req *rsyncv1.UpdateRolloutRequest) (*rsyncv1.UpdateRolloutResponse, error) {
	gen, err := s.engine.UpdateGuest(ctx, req.GetOwner(), req.GetHostOwner(), req.Repair, req.GetClusters())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.UpdateRolloutResponse{Generation: gen}, nil
}

// DeleteRollout implements rsyncv1.RsyncInternalServiceServer.
func (s *Service) DeleteRollout(ctx context.Context, req *rsyncv1.DeleteRolloutRequest) (*rsyncv1.DeleteRolloutResponse, error) {
	gen, err := s.engine.DeleteForced(ctx, req.GetOwner(), req.GetForce())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.DeleteRolloutResponse{Generation: gen}, nil
}

// StopRollout implements rsyncv1.RsyncInternalServiceServer.
func (s *Service) StopRollout(ctx context.Context, req *rsyncv1.StopRolloutRequest) (*rsyncv1.StopRolloutResponse, error) {
	if err := s.engine.Stop(ctx, req.GetOwner()); err != nil {
		return nil, err
	}
	return &rsyncv1.StopRolloutResponse{}, nil
}

// GetRolloutStatus implements rsyncv1.RsyncInternalServiceServer.
func (s *Service) GetRolloutStatus(ctx context.Context, req *rsyncv1.GetRolloutStatusRequest) (*rsyncv1.GetRolloutStatusResponse, error) {
	st, err := s.engine.Status(ctx, req.GetOwner())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.GetRolloutStatusResponse{Status: st}, nil
}

// GetRolloutStates implements rsyncv1.RsyncInternalServiceServer.
func (s *Service) GetRolloutStates(ctx context.Context, req *rsyncv1.GetRolloutStatesRequest) (*rsyncv1.GetRolloutStatesResponse, error) {
	sts, err := s.engine.States(ctx, req.GetOwners())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.GetRolloutStatesResponse{Statuses: sts}, nil
}

// WatchRolloutStatus implements rsyncv1.RsyncInternalServiceServer.
func (s *Service) WatchRolloutStatus(req *rsyncv1.WatchRolloutStatusRequest, stream rsyncv1.RsyncInternalService_WatchRolloutStatusServer) error {
	return s.engine.Watch(stream.Context(), req.GetOwner(), req.GetUntilSettled(), func(st *rsyncv1.RolloutStatus) error {
		return stream.Send(&rsyncv1.WatchRolloutStatusResponse{Status: st})
	})
}
