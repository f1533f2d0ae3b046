package user

import (
	"time"

	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
)

// Render is the pure rendering, for the fast tests: users (with their
// CSRs) and permissions of logical cloud lc of project, in namespace, with
// certificates asked for lifetime.
func Render(project, lc, namespace string, lifetime time.Duration, users []*userv1.User, perms []*userv1.UserPermission) ([]string, []*userv1.RenderedUser) {
	return target{project: project, lc: lc, namespace: namespace, certLifetime: lifetime}.render(users, perms)
}

// RenderAt is Render for a logical cloud at level, with no users.
func RenderAt(level, namespace string, perms []*userv1.UserPermission) []string {
	manifests, _ := target{project: "p", lc: "lc", namespace: namespace, level: level}.render(nil, perms)
	return manifests
}

// KeySecret names the sealed key of a user whose CSR the service made
// (tests write records as an earlier version did).
const KeySecret = keySecret
