// Package user implements the user service: the users of each logical cloud
// (and, in later versions, their permissions and key material).
package user

import (
	"context"

	"google.golang.org/grpc"

	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/store"
)

// Service is the user service's gRPC API.
type Service struct {
	userv1.UnimplementedUserServiceServer
	users *store.Records[*userv1.User]
}

// New opens the service's collection on st.
func New(st *store.Store) *Service {
	return &Service{users: store.NewRecords(st, "users", "user", func() *userv1.User { return &userv1.User{} })}
}

// Register serves the API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) { userv1.RegisterUserServiceServer(r, s) }

// CreateUser implements userv1.UserServiceServer.
func (s *Service) CreateUser(ctx context.Context, req *userv1.CreateUserRequest) (*userv1.CreateUserResponse, error) {
	u := req.GetUser()
	if u.GetType() == "" {
		u.Type = "certificate"
	}
	parent := store.Key(req.GetProject(), req.GetLogicalCloud())
	if err := s.users.Create(ctx, store.Key(parent, u.GetName()), parent, u); err != nil {
		return nil, err
	}
	return &userv1.CreateUserResponse{User: u}, nil
}

// GetUser implements userv1.UserServiceServer.
func (s *Service) GetUser(ctx context.Context, req *userv1.GetUserRequest) (*userv1.GetUserResponse, error) {
	u, err := s.users.Get(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName()))
	if err != nil {
		return nil, err
	}
	return &userv1.GetUserResponse{User: u.Msg}, nil
}

// ListUsers implements userv1.UserServiceServer.
func (s *Service) ListUsers(ctx context.Context, req *userv1.ListUsersRequest) (*userv1.ListUsersResponse, error) {
	us, err := s.users.List(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()))
	if err != nil {
		return nil, err
	}
	return &userv1.ListUsersResponse{Users: us}, nil
}

// DeleteUser implements userv1.UserServiceServer.
func (s *Service) DeleteUser(ctx context.Context, req *userv1.DeleteUserRequest) (*userv1.DeleteUserResponse, error) {
	if err := s.users.Delete(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName())); err != nil {
		return nil, err
	}
	return &userv1.DeleteUserResponse{}, nil
}
