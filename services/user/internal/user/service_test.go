package user_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/user/internal/user"
)

func TestUsers(t *testing.T) {
	t.Parallel()
	c := userv1.NewUserServiceClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		return []server.Service{user.New(st)}
	}))
	ctx := context.Background()
	create := func(lc, name, typ string) error {
		_, err := c.CreateUser(ctx, &userv1.CreateUserRequest{Project: "p", LogicalCloud: lc, User: &userv1.User{Name: name, Type: typ}})
		return err
	}
	require.NoError(t, create("lc", "user-1", ""))
	require.NoError(t, create("lc", "user-2", "token"))
	require.NoError(t, create("other", "user-1", ""), "names are per logical cloud")
	require.Equal(t, codes.AlreadyExists, status.Code(create("lc", "user-1", "")))
	st, _ := status.FromError(create("lc", "user-3", "password"))
	require.Equal(t, "user.type", errs.FieldOf(st))

	got, err := c.GetUser(ctx, &userv1.GetUserRequest{Project: "p", LogicalCloud: "lc", Name: "user-1"})
	require.NoError(t, err)
	require.Equal(t, "certificate", got.GetUser().GetType(), "the default type")
	list, err := c.ListUsers(ctx, &userv1.ListUsersRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Len(t, list.GetUsers(), 2)
	_, err = c.DeleteUser(ctx, &userv1.DeleteUserRequest{Project: "p", LogicalCloud: "lc", Name: "user-2"})
	require.NoError(t, err)
	list, err = c.ListUsers(ctx, &userv1.ListUsersRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Len(t, list.GetUsers(), 1)
}
