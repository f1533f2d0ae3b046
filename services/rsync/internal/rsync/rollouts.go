package rsync

import (
	"context"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// SubmitRollout implements rsyncv1.RsyncInternalServiceServer.
func (ro *rollouts) SubmitRollout(ctx context.Context, req *rsyncv1.SubmitRolloutRequest) (*rsyncv1.SubmitRolloutResponse, error) {
	gen, err := ro.engine.SubmitStaged(ctx, req.GetOwner(), req.GetHostOwner(), req.Repair, req.GetStrategy(), req.GetClusters())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.SubmitRolloutResponse{Generation: gen}, nil
}

// UpdateRollout implements rsyncv1.RsyncInternalServiceServer.
func (ro *rollouts) UpdateRollout(ctx context.Context, req *rsyncv1.UpdateRolloutRequest) (*rsyncv1.UpdateRolloutResponse, error) {
	gen, err := ro.engine.UpdateStaged(ctx, req.GetOwner(), req.GetHostOwner(), req.Repair, req.GetStrategy(), req.GetClusters())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.UpdateRolloutResponse{Generation: gen}, nil
}

// DeleteRollout implements rsyncv1.RsyncInternalServiceServer.
func (ro *rollouts) DeleteRollout(ctx context.Context, req *rsyncv1.DeleteRolloutRequest) (*rsyncv1.DeleteRolloutResponse, error) {
	gen, err := ro.engine.DeleteForced(ctx, req.GetOwner(), req.GetForce())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.DeleteRolloutResponse{Generation: gen}, nil
}

// StopRollout implements rsyncv1.RsyncInternalServiceServer.
func (ro *rollouts) StopRollout(ctx context.Context, req *rsyncv1.StopRolloutRequest) (*rsyncv1.StopRolloutResponse, error) {
	if err := ro.engine.Stop(ctx, req.GetOwner()); err != nil {
		return nil, err
	}
	return &rsyncv1.StopRolloutResponse{}, nil
}

// ResumeRollout implements rsyncv1.RsyncInternalServiceServer.
func (ro *rollouts) ResumeRollout(ctx context.Context, req *rsyncv1.ResumeRolloutRequest) (*rsyncv1.ResumeRolloutResponse, error) {
	if err := ro.engine.Resume(ctx, req.GetOwner()); err != nil {
		return nil, err
	}
	return &rsyncv1.ResumeRolloutResponse{}, nil
}

// RollbackRollout implements rsyncv1.RsyncInternalServiceServer.
func (ro *rollouts) RollbackRollout(ctx context.Context, req *rsyncv1.RollbackRolloutRequest) (*rsyncv1.RollbackRolloutResponse, error) {
	gen, err := ro.engine.Rollback(ctx, req.GetOwner())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.RollbackRolloutResponse{Generation: gen}, nil
}

// GetRolloutStatus implements rsyncv1.RsyncInternalServiceServer.
func (ro *rollouts) GetRolloutStatus(ctx context.Context, req *rsyncv1.GetRolloutStatusRequest) (*rsyncv1.GetRolloutStatusResponse, error) {
	st, err := ro.engine.Status(ctx, req.GetOwner())
	if err != nil {
		return nil, err
	}
	ro.health.withHealthNamed(ctx, st)
	return &rsyncv1.GetRolloutStatusResponse{Status: st}, nil
}

// GetRolloutStates implements rsyncv1.RsyncInternalServiceServer.
func (ro *rollouts) GetRolloutStates(ctx context.Context, req *rsyncv1.GetRolloutStatesRequest) (*rsyncv1.GetRolloutStatesResponse, error) {
	sts, err := ro.engine.States(ctx, req.GetOwners())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.GetRolloutStatesResponse{Statuses: sts}, nil
}

// WatchRolloutStatus implements rsyncv1.RsyncInternalServiceServer.
func (ro *rollouts) WatchRolloutStatus(req *rsyncv1.WatchRolloutStatusRequest, stream rsyncv1.RsyncInternalService_WatchRolloutStatusServer) error {
	return ro.engine.Watch(stream.Context(), req.GetOwner(), req.GetUntilSettled(), func(st *rsyncv1.RolloutStatus) error {
		ro.health.withHealthNamed(stream.Context(), st)
		return stream.Send(&rsyncv1.WatchRolloutStatusResponse{Status: st})
	})
}
