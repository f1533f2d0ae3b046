package user_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/services/user/internal/user"
)

// TestAssignOwnersToStoredFlatBodies: permissions a flat body stored
// before permissions named their users (none named: every user's) are
// given, once, to the user they were made for, in logical clouds with
// several users; other permissions, and logical clouds with one user,
// are left as they are. Rendering then binds each to its user only.
func TestAssignOwnersToStoredFlatBodies(t *testing.T) {
	t.Parallel()
	c, core, st := serveStore(t)
	ctx := context.Background()
	add := func(lc string, users []string, perms ...*userv1.UserPermission) {
		core.Add("p", lc, kube.LevelStandard, lc)
		for _, u := range users {
			_, err := c.CreateUser(ctx, &userv1.CreateUserRequest{Project: "p", LogicalCloud: lc, User: &userv1.User{Name: u, Type: "token"}})
			require.NoError(t, err)
		}
		for _, p := range perms {
			_, err := c.CreateUserPermission(ctx, &userv1.CreateUserPermissionRequest{Project: "p", LogicalCloud: lc, UserPermission: p})
			require.NoError(t, err)
		}
	}
	perm := func(name string, users ...string) *userv1.UserPermission {
		return &userv1.UserPermission{PermissionName: name, ApiGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}, Users: users}
	}
	// As the flat body stored them before: no users.
	add("flat", []string{"user-1", "user-2", "a", "a-0"},
		perm("user-1"), perm("user-2-0"), perm("user-2-1"), perm("a-0"), perm("events"), perm("user-1-x"), perm("named", "a"))
	add("single", []string{"solo"}, perm("solo"))

	svc := user.New(keep(core, st, "user"), week)
	n, err := svc.AssignOwners(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
	usersOf := func(lc string) map[string][]string {
		resp, err := c.ListLogicalCloudPermissions(ctx, &userv1.ListLogicalCloudPermissionsRequest{Project: "p", LogicalCloud: lc})
		require.NoError(t, err)
		out := map[string][]string{}
		for _, p := range resp.GetUserPermissions() {
			out[p.GetPermissionName()] = p.GetUsers()
		}
		return out
	}
	require.Equal(t, map[string][]string{
		"user-1": {"user-1"}, "user-2-0": {"user-2"}, "user-2-1": {"user-2"},
		"a-0":    {"a", "a-0"}, // either user's: both keep it, no one else does
		"events": nil, "user-1-x": nil, "named": {"a"},
	}, usersOf("flat"))
	require.Equal(t, map[string][]string{"solo": nil}, usersOf("single"))

	// Once: a permission for every user added afterwards keeps no users.
	_, err = c.CreateUserPermission(ctx, &userv1.CreateUserPermissionRequest{Project: "p", LogicalCloud: "flat", UserPermission: perm("user-2-7")})
	require.NoError(t, err)
	n, err = user.New(keep(core, st, "user"), week).AssignOwners(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Nil(t, usersOf("flat")["user-2-7"])

	// The render binds user-1's permission to user-1 alone.
	resp, err := c.RenderUsers(ctx, &userv1.RenderUsersRequest{Project: "p", LogicalCloud: "flat"})
	require.NoError(t, err)
	found := false
	for _, m := range resp.GetManifests() {
		if o := decode(t, m); o.Kind == "RoleBinding" && o.Metadata.Name == "user-1" {
			require.Equal(t, []map[string]string{{"kind": "ServiceAccount", "name": "user-1", "namespace": "flat"}}, o.Subjects)
			found = true
		}
	}
	require.True(t, found, "user-1's RoleBinding is rendered")
}
