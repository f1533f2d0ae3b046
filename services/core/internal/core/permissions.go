package core

import (
	"context"
	"slices"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/logging"
)

// A logical cloud's permissions are the user service's records (what
// .../user-permissions lists); the logical cloud's own record keeps none,
// even those it was created with. Its answers show them at
// spec.user.user-permissions, read through the user service's internal
// API (ListLogicalCloudsPermissions: one call per page of logical clouds).
// The user service never calls core: it checks a logical cloud against the
// facts core told it (facts.go).

// hasUserPermissions says whether the answers about logical cloud c show
// permissions: an admin logical cloud has no user to grant them to.
func hasUserPermissions(c *corev1.LogicalCloud) bool {
	return c.GetSpec().GetUser() != nil && c.GetSpec().GetLevel() != levelAdmin
}

// permissions reads the permissions of logical cloud lc of project,
// ordered by name.
func (s *Clouds) permissions(ctx context.Context, project, lc string) ([]*userv1.UserPermission, error) {
	resp, err := s.usersInternal.ListLogicalCloudPermissions(ctx, &userv1.ListLogicalCloudPermissionsRequest{Project: project, LogicalCloud: lc})
	if err != nil {
		return nil, err
	}
	return byName(resp.GetUserPermissions()), nil
}

// byName orders permissions ps by name, in place, and answers them.
func byName(ps []*userv1.UserPermission) []*userv1.UserPermission {
	slices.SortFunc(ps, func(a, b *userv1.UserPermission) int {
		return strings.Compare(a.GetPermissionName(), b.GetPermissionName())
	})
	return ps
}

// keepsPermissions refuses spec.user.user-permissions in a PUT of logical
// cloud cur unless they are the permissions it has now (cur's, as read
// from the user service): a GET's body can be sent back, but permissions
// change at .../user-permissions. The order does not matter; a namespace
// left empty is the one the permission would get (kube.PermissionNamespace).
func keepsPermissions(cur *corev1.LogicalCloudSpec, now, in []*userv1.UserPermission) error {
	if !samePermissions(cur, now, in) {
		return errs.Invalid("spec.user.user-permissions", "are not the logical cloud's permissions: change permissions at .../user-permissions")
	}
	return nil
}

func samePermissions(cur *corev1.LogicalCloudSpec, now, in []*userv1.UserPermission) bool {
	if len(now) != len(in) {
		return false
	}
	left := make(map[string]*userv1.UserPermission, len(now))
	for _, p := range now {
		left[p.GetPermissionName()] = p
	}
	for _, p := range in {
		have, ok := left[p.GetPermissionName()]
		if !ok {
			return false
		}
		delete(left, p.GetPermissionName())
		if p.GetNamespace() == "" {
			ns, err := kube.PermissionNamespace("", cur.GetLevel(), cur.GetNamespace(), "")
			if err != nil {
				return false
			}
			p = proto.CloneOf(p)
			p.Namespace = ns
		}
		if !proto.Equal(p, have) {
			return false
		}
	}
	return true
}

// showPermissions sets the permissions of the logical clouds cs of project
// that show them, read in one call to the user service for all of them
// (a page of logical clouds makes one call, not one per logical cloud).
// Permissions the user service cannot tell now are left empty rather than
// failing the read.
func (s *Clouds) showPermissions(ctx context.Context, project string, cs []*corev1.LogicalCloud) {
	var names []string
	for _, c := range cs {
		if hasUserPermissions(c) {
			names = append(names, c.GetMetadata().GetName())
		}
	}
	if len(names) == 0 {
		return
	}
	resp, err := s.usersInternal.ListLogicalCloudsPermissions(ctx, &userv1.ListLogicalCloudsPermissionsRequest{Project: project, LogicalClouds: names})
	if err != nil {
		logging.FromOr(ctx, s.log).Info("logical clouds shown without their permissions: the user service did not answer",
			zap.String("project", project), zap.Int("logical_clouds", len(names)), zap.Error(err))
		return
	}
	byCloud := make(map[string][]*userv1.UserPermission, len(resp.GetLogicalClouds()))
	for _, e := range resp.GetLogicalClouds() {
		byCloud[e.GetLogicalCloud()] = byName(e.GetUserPermissions())
	}
	for _, c := range cs {
		if ps, ok := byCloud[c.GetMetadata().GetName()]; ok && hasUserPermissions(c) {
			c.Spec.User.UserPermissions = ps
		}
	}
}
