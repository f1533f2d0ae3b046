package user

import userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"

// Render is the pure rendering, for the fast tests: users (with their
// CSRs) and permissions of logical cloud lc of project, in namespace.
func Render(project, lc, namespace string, users []*userv1.User, perms []*userv1.UserPermission) ([]string, []*userv1.RenderedUser) {
	return target{project: project, lc: lc, namespace: namespace}.render(users, perms)
}
