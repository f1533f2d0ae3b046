package core

import (
	"context"
	"errors"

	"github.com/dcm-project/dcm/platform/errs"
)

// The number of mesh-enabled logical clouds of a project is bounded
// (DCM_MAX_MESHES_PER_PROJECT, Settings.MaxMeshes): each one puts an
// istiod and three gateways on every cluster it spans. A logical cloud
// turns its mesh on when it is created with spec.service-mesh.enabled (or
// through seed 002's POST .../control-plane), or when an update or that
// POST enables it on an existing one. Each holds the project's mesh lock
// while it counts and writes, so two requests of a project cannot both
// take the last place (across core replicas too).

// meshField is the field a refusal names.
const meshField = "spec.service-mesh"

// meshSlot takes the project's mesh lock and checks that logical cloud lc
// of project may turn its mesh on: the project's other logical clouds with
// the mesh enabled are fewer than s.maxMeshes (0: no maximum). The caller
// writes the logical cloud with the context returned, then calls release.
func (s *Meshes) meshSlot(ctx context.Context, project, lc string) (context.Context, func(), error) {
	if s.maxMeshes <= 0 {
		return ctx, func() {}, nil
	}
	ctx, release, err := s.meshLocks.lock(ctx, "project:"+project, "project "+project)
	if err != nil {
		return ctx, nil, err
	}
	clouds, err := s.clouds.List(ctx, project)
	if err != nil {
		release()
		return ctx, nil, err
	}
	n := 0
	for _, c := range clouds {
		if c.GetMetadata().GetName() != lc && c.GetSpec().GetServiceMesh().GetEnabled() {
			n++
		}
	}
	if n >= s.maxMeshes {
		release()
		return ctx, nil, meshLimitError(project, n, s.maxMeshes)
	}
	return ctx, release, nil
}

func meshLimitError(project string, n, maxMeshes int) error {
	err := errs.Because(errs.ReasonMeshLimit, "%s: project %q already has %d logical clouds with the service mesh enabled, the installation's maximum of %d (DCM_MAX_MESHES_PER_PROJECT); disable the mesh of one of them or delete it first",
		meshField, project, n, maxMeshes)
	var e *errs.Error
	if errors.As(err, &e) {
		e.Field = meshField
	}
	return err
}
