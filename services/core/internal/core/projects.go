package core

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Projects serves CoreService: the projects every logical cloud, token and
// role is scoped to, and (its part ClusterSets) the cluster sets bound to
// them.
type Projects struct {
	unimplementedCore
	*ClusterSets
	projects *store.Records[*corev1.Project]
	clouds   *store.Records[*corev1.LogicalCloud]
}

// unimplementedCore answers the RPCs no part serves; one level down, so
// that the parts' methods, one level up, win.
type unimplementedCore struct {
	corev1.UnimplementedCoreServiceServer
}

// NewProjects opens the project and logical-cloud collections on st; sets
// serves the cluster sets.
func NewProjects(st *store.Store, sets *ClusterSets) *Projects {
	return &Projects{ClusterSets: sets, projects: projectRecords(st), clouds: cloudRecords(st)}
}

// Register serves the API on r.
func (s *Projects) Register(r grpc.ServiceRegistrar) { corev1.RegisterCoreServiceServer(r, s) }

// CreateProject implements corev1.CoreServiceServer. The default cluster
// set, if there is one, is bound to the new project once it is stored; if
// that fails, the project is removed again.
func (s *Projects) CreateProject(ctx context.Context, req *corev1.CreateProjectRequest) (*corev1.CreateProjectResponse, error) {
	p := &corev1.Project{Metadata: req.GetMetadata()}
	if err := s.projects.CreateChecked(ctx, p.GetMetadata().GetName(), "", p, func(ctx context.Context) error {
		return s.bindDefault(ctx, p.GetMetadata().GetName())
	}); err != nil {
		return nil, err
	}
	return &corev1.CreateProjectResponse{Project: p}, nil
}

// GetProject implements corev1.CoreServiceServer.
func (s *Projects) GetProject(ctx context.Context, req *corev1.GetProjectRequest) (*corev1.GetProjectResponse, error) {
	p, err := s.projects.Get(ctx, req.GetProject())
	if err != nil {
		return nil, err
	}
	return &corev1.GetProjectResponse{Project: p.Msg}, nil
}

// ListProjects implements corev1.CoreServiceServer.
func (s *Projects) ListProjects(ctx context.Context, req *corev1.ListProjectsRequest) (*corev1.ListProjectsResponse, error) {
	ps, next, err := s.projects.ListPage(ctx, "", store.PageOf(req))
	if err != nil {
		return nil, err
	}
	return &corev1.ListProjectsResponse{Projects: ps, NextPageToken: next}, nil
}

// UpdateProject implements corev1.CoreServiceServer. The name is the
// record's identity: a body naming another project is refused.
func (s *Projects) UpdateProject(ctx context.Context, req *corev1.UpdateProjectRequest) (*corev1.UpdateProjectResponse, error) {
	if n := req.GetMetadata().GetName(); n != req.GetProject() {
		return nil, errs.Invalid("metadata.name", "must equal the project in the path (%q), got %q", req.GetProject(), n)
	}
	p, err := s.projects.Modify(ctx, req.GetProject(), func(p *corev1.Project) error {
		p.Metadata = req.GetMetadata()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &corev1.UpdateProjectResponse{Project: p}, nil
}

// DeleteProject implements corev1.CoreServiceServer. A project that still
// has logical clouds (being deleted ones included) is refused. The project
// is marked first, so a logical cloud created meanwhile either sees the
// mark or is seen here.
func (s *Projects) DeleteProject(ctx context.Context, req *corev1.DeleteProjectRequest) (*corev1.DeleteProjectResponse, error) {
	name := req.GetProject()
	if _, err := s.projects.MarkDeleting(ctx, name); err != nil {
		return nil, err
	}
	clouds, err := s.clouds.Children(ctx, name)
	if err == nil && len(clouds) > 0 {
		names := make([]string, 0, len(clouds))
		for _, c := range clouds {
			names = append(names, strings.TrimPrefix(c.ID, name+"/"))
		}
		err = errs.Because(errs.ReasonReferenced, "project %q still has logical clouds (%s): delete them first", name, strings.Join(names, ", "))
	}
	if err != nil {
		if uerr := s.projects.Unmark(context.WithoutCancel(ctx), name); uerr != nil {
			return nil, errors.Join(err, uerr)
		}
		return nil, err
	}
	if err := s.unbindAll(ctx, name); err != nil {
		if uerr := s.projects.Unmark(context.WithoutCancel(ctx), name); uerr != nil {
			return nil, errors.Join(err, uerr)
		}
		return nil, err
	}
	if err := s.projects.Delete(ctx, name); err != nil {
		return nil, err
	}
	return &corev1.DeleteProjectResponse{}, nil
}
