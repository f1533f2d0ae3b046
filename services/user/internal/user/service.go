// Package user implements the user service: the users of each logical
// cloud and their permissions (RBAC rules, checked with Kubernetes' rules
// and the logical cloud's level). It asks core, over gRPC, whether a
// logical cloud exists before it stores or answers anything under it.
package user

import (
	"context"

	"google.golang.org/grpc"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/store"
)

// Service is the user service's gRPC API.
type Service struct {
	userv1.UnimplementedUserServiceServer
	users *store.Records[*userv1.User]
	perms *store.Records[*userv1.UserPermission]
	core  corev1.LogicalCloudServiceClient
}

// New opens the service's collections on st; core answers whether a
// logical cloud exists.
func New(st *store.Store, core corev1.LogicalCloudServiceClient) *Service {
	return &Service{
		users: store.NewRecords(st, "users", "user", func() *userv1.User { return &userv1.User{} }),
		perms: store.NewRecords(st, "user_permissions", "user permission", func() *userv1.UserPermission { return &userv1.UserPermission{} }),
		core:  core,
	}
}

// Register serves the API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) { userv1.RegisterUserServiceServer(r, s) }

// cloud reads the logical cloud from core: NotFound if it or its project
// is missing or being deleted.
func (s *Service) cloud(ctx context.Context, project, lc string) (*corev1.LogicalCloud, error) {
	resp, err := s.core.GetLogicalCloud(ctx, &corev1.GetLogicalCloudRequest{Project: project, LogicalCloud: lc})
	if err != nil {
		return nil, err
	}
	return resp.GetLogicalCloud(), nil
}

// exists is cloud as a CreateChecked check.
func (s *Service) exists(project, lc string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := s.cloud(ctx, project, lc)
		return err
	}
}

// CreateUser implements userv1.UserServiceServer.
func (s *Service) CreateUser(ctx context.Context, req *userv1.CreateUserRequest) (*userv1.CreateUserResponse, error) {
	u := req.GetUser()
	if u.GetType() == "" {
		u.Type = "certificate"
	}
	if c := u.GetCertificate(); c != "" {
		if err := kube.CheckCSR("user.certificate", c, u.GetName()); err != nil {
			return nil, err
		}
	}
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	if c.GetSpec().GetLevel() == kube.LevelAdmin {
		return nil, errs.FailedPrecondition("logical cloud %q is an admin logical cloud: it has no users", lc)
	}
	parent := store.Key(project, lc)
	if err := s.users.CreateChecked(ctx, store.Key(parent, u.GetName()), parent, u, s.exists(project, lc)); err != nil {
		return nil, err
	}
	return &userv1.CreateUserResponse{User: u}, nil
}

// GetUser implements userv1.UserServiceServer.
func (s *Service) GetUser(ctx context.Context, req *userv1.GetUserRequest) (*userv1.GetUserResponse, error) {
	if _, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	u, err := s.users.Get(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName()))
	if err != nil {
		return nil, err
	}
	return &userv1.GetUserResponse{User: u.Msg}, nil
}

// ListUsers implements userv1.UserServiceServer.
func (s *Service) ListUsers(ctx context.Context, req *userv1.ListUsersRequest) (*userv1.ListUsersResponse, error) {
	if _, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	us, err := s.users.List(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()))
	if err != nil {
		return nil, err
	}
	return &userv1.ListUsersResponse{Users: us}, nil
}

// DeleteUser implements userv1.UserServiceServer.
func (s *Service) DeleteUser(ctx context.Context, req *userv1.DeleteUserRequest) (*userv1.DeleteUserResponse, error) {
	if _, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	if err := s.users.Delete(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName())); err != nil {
		return nil, err
	}
	return &userv1.DeleteUserResponse{}, nil
}

// DeleteUsers implements userv1.UserServiceServer.
func (s *Service) DeleteUsers(ctx context.Context, req *userv1.DeleteUsersRequest) (*userv1.DeleteUsersResponse, error) {
	if _, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	if _, err := s.users.DeleteUnder(ctx, store.Key(req.GetProject(), req.GetLogicalCloud())); err != nil {
		return nil, err
	}
	return &userv1.DeleteUsersResponse{}, nil
}

// checkPermission checks a permission's rule and resolves its namespace
// by the logical cloud's level.
func checkPermission(c *corev1.LogicalCloud, p *userv1.UserPermission) error {
	ns, err := kube.PermissionNamespace("user_permission.namespace", c.GetSpec().GetLevel(), c.GetSpec().GetNamespace(), p.GetNamespace())
	if err != nil {
		return err
	}
	p.Namespace = ns
	return kube.CheckRule("user_permission", p.GetApiGroups(), p.GetResources(), p.GetVerbs())
}

// CreateUserPermission implements userv1.UserServiceServer.
func (s *Service) CreateUserPermission(ctx context.Context, req *userv1.CreateUserPermissionRequest) (*userv1.CreateUserPermissionResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	p := req.GetUserPermission()
	if err := checkPermission(c, p); err != nil {
		return nil, err
	}
	parent := store.Key(project, lc)
	if err := s.perms.CreateChecked(ctx, store.Key(parent, p.GetPermissionName()), parent, p, s.exists(project, lc)); err != nil {
		return nil, err
	}
	return &userv1.CreateUserPermissionResponse{UserPermission: p}, nil
}

// GetUserPermission implements userv1.UserServiceServer.
func (s *Service) GetUserPermission(ctx context.Context, req *userv1.GetUserPermissionRequest) (*userv1.GetUserPermissionResponse, error) {
	if _, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	p, err := s.perms.Get(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName()))
	if err != nil {
		return nil, err
	}
	return &userv1.GetUserPermissionResponse{UserPermission: p.Msg}, nil
}

// ListUserPermissions implements userv1.UserServiceServer.
func (s *Service) ListUserPermissions(ctx context.Context, req *userv1.ListUserPermissionsRequest) (*userv1.ListUserPermissionsResponse, error) {
	if _, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	ps, err := s.perms.List(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()))
	if err != nil {
		return nil, err
	}
	return &userv1.ListUserPermissionsResponse{UserPermissions: ps}, nil
}

// UpdateUserPermission implements userv1.UserServiceServer.
func (s *Service) UpdateUserPermission(ctx context.Context, req *userv1.UpdateUserPermissionRequest) (*userv1.UpdateUserPermissionResponse, error) {
	p := req.GetUserPermission()
	if n := p.GetPermissionName(); n != req.GetName() {
		return nil, errs.Invalid("user_permission.permission-name", "must equal the permission in the path (%q), got %q", req.GetName(), n)
	}
	c, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	if err := checkPermission(c, p); err != nil {
		return nil, err
	}
	_, err = s.perms.Modify(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName()), func(cur *userv1.UserPermission) error {
		cur.Namespace, cur.ApiGroups, cur.Resources, cur.Verbs = p.GetNamespace(), p.GetApiGroups(), p.GetResources(), p.GetVerbs()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &userv1.UpdateUserPermissionResponse{UserPermission: p}, nil
}

// DeleteUserPermission implements userv1.UserServiceServer.
func (s *Service) DeleteUserPermission(ctx context.Context, req *userv1.DeleteUserPermissionRequest) (*userv1.DeleteUserPermissionResponse, error) {
	if _, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	if err := s.perms.Delete(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName())); err != nil {
		return nil, err
	}
	return &userv1.DeleteUserPermissionResponse{}, nil
}

// PurgeLogicalCloud implements userv1.UserServiceServer.
func (s *Service) PurgeLogicalCloud(ctx context.Context, req *userv1.PurgeLogicalCloudRequest) (*userv1.PurgeLogicalCloudResponse, error) {
	parent := store.Key(req.GetProject(), req.GetLogicalCloud())
	n, err := s.users.DeleteUnder(ctx, parent)
	if err != nil {
		return nil, err
	}
	m, err := s.perms.DeleteUnder(ctx, parent)
	if err != nil {
		return nil, err
	}
	return &userv1.PurgeLogicalCloudResponse{Removed: n + m}, nil
}
