package core

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// TestPlanGivesEachUserItsPermissions: seed 002's flat body makes each
// user's permissions that user's alone; seed 000's inline permissions may
// name the logical cloud's user and no other.
func TestPlanGivesEachUserItsPermissions(t *testing.T) {
	t.Parallel()
	req := &corev1.CreateLogicalCloudRequest{Project: "p1"}
	require.NoError(t, protojson.Unmarshal([]byte(`{"name": "lc-1", "user": [
	  {"name": "user-1", "permissions": {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}},
	  {"name": "user-2", "permissions": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
	                                     {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}]}`), req))
	req.Project = "p1"
	p, err := planCreate(req, grants{})
	require.NoError(t, err)
	got := map[string][]string{}
	for _, perm := range p.perms {
		got[perm.GetPermissionName()] = perm.GetUsers()
	}
	require.Equal(t, map[string][]string{"user-1": {"user-1"}, "user-2-0": {"user-2"}, "user-2-1": {"user-2"}}, got)

	spec := func(users ...string) *corev1.CreateLogicalCloudRequest {
		return &corev1.CreateLogicalCloudRequest{Project: "p1", Metadata: &typesv1.Metadata{Name: "lc-2"}, Spec: &corev1.LogicalCloudSpec{
			User: &corev1.LogicalCloudUser{UserName: "alice", UserPermissions: []*userv1.UserPermission{
				{PermissionName: "cm", ApiGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, Users: users},
			}}}}
	}
	p, err = planCreate(spec("alice"), grants{})
	require.NoError(t, err)
	require.Equal(t, []string{"alice"}, p.perms[0].GetUsers())
	p, err = planCreate(spec(), grants{})
	require.NoError(t, err)
	require.Empty(t, p.perms[0].GetUsers(), "no users: every user's")
	_, err = planCreate(spec("alice", "mallory"), grants{})
	require.Equal(t, codes.InvalidArgument, errs.Code(err), "%v", err)
	require.Equal(t, "spec.user.user-permissions[0].users[1]", errs.FieldOf(status.Convert(err)))
}

// TestFactsTellEveryUser: the facts core tells carry every user of the
// logical cloud: all of seed 002's flat body's users (spec.users), not
// only the first (spec.user), and those added later; a record from before
// spec.users tells its spec.user; an admin logical cloud has none.
func TestFactsTellEveryUser(t *testing.T) {
	t.Parallel()
	req := &corev1.CreateLogicalCloudRequest{}
	require.NoError(t, protojson.Unmarshal([]byte(`{"name": "lc-1", "user": [{"name": "user-2"}, {"name": "user-1"}]}`), req))
	req.Project = "p1"
	p, err := planCreate(req, grants{})
	require.NoError(t, err)
	require.Equal(t, []string{"user-1", "user-2"}, p.lc.GetSpec().GetUsers())
	require.Equal(t, []string{"user-1", "user-2"}, factsOf("p1", p.lc, nil).GetUsers())
	require.Equal(t, "user-2", p.lc.GetSpec().GetUser().GetUserName(), "spec.user is the body's first user")

	old := &corev1.LogicalCloud{Metadata: &typesv1.Metadata{Name: "old"},
		Spec: &corev1.LogicalCloudSpec{Level: levelStandard, Namespace: "old", User: &corev1.LogicalCloudUser{UserName: "u"}}}
	require.Equal(t, []string{"u"}, factsOf("p1", old, nil).GetUsers())
	old.Spec.Users = []string{"u", "v"}
	require.Equal(t, []string{"u", "v"}, factsOf("p1", old, nil).GetUsers())
	admin := &corev1.LogicalCloud{Metadata: &typesv1.Metadata{Name: "adm"}, Spec: &corev1.LogicalCloudSpec{Level: levelAdmin}}
	require.Empty(t, factsOf("p1", admin, nil).GetUsers())
}
