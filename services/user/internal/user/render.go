package user

import (
	"slices"
	"time"

	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/kube"
)

// User types: how a user authenticates on the clusters.
const (
	typeCertificate = "certificate"
	typeToken       = "token"
)

const rbacGroup = "rbac.authorization.k8s.io"

// target is the logical cloud being rendered.
type target struct {
	project, lc string
	namespace   string // the logical cloud's namespace
	level       string // the logical cloud's level
	// certLifetime is how long the certificates the clusters issue for
	// the CSRs are valid (DCM_CERT_LIFETIME).
	certLifetime time.Duration
}

func (t target) labels() map[string]string { return kube.Labels(t.project, t.lc) }

// shared is name made unique across logical clouds, for objects that
// share a scope with other logical clouds' (cluster-scoped ones, and those
// in a namespace not the logical cloud's own): kube.SharedName.
func (t target) shared(name string) string { return kube.SharedName(t.project, t.lc, name) }

func isToken(u *userv1.User) bool { return u.GetType() == typeToken }

// checkCSR checks certificate user u's CSR as DCM takes it now: asking for
// the user's identity of kube.UserIdentity (kube.CheckCSR). A user who
// brought a CSR before DCM scoped the identities may have one that does
// not: it is not sent to the clusters.
func (t target) checkCSR(field string, u *userv1.User) error {
	return kube.CheckCSR(field, u.GetCertificate(), t.project, t.lc, u.GetName())
}

// rendered is how u authenticates on the clusters.
func (t target) rendered(u *userv1.User) *userv1.RenderedUser {
	if isToken(u) {
		return &userv1.RenderedUser{Name: u.GetName(), Type: typeToken, Namespace: t.namespace, ServiceAccount: u.GetName()}
	}
	return &userv1.RenderedUser{Name: u.GetName(), Type: typeCertificate, CsrName: kube.CSRName(t.project, t.lc, u.GetName())}
}

// render makes the objects of users (each a certificate user with its
// CSR, or a token user with its ServiceAccount) and permissions: the
// users' own objects first, then each Role or ClusterRole followed by its
// binding to the users the permission names (every user when it names
// none): a permission never reaches a user it was not granted to, and one
// whose users are all gone is bound to no one. A certificate user is its
// identity of kube.UserIdentity; one whose CSR asks for another (see
// checkCSR) gets no CSR and no binding. The same input gives
// byte-identical manifests.
func (t target) render(users []*userv1.User, perms []*userv1.UserPermission) ([]string, []*userv1.RenderedUser) {
	var manifests []string
	out := make([]*userv1.RenderedUser, 0, len(users))
	// subjects of each user, in the users' order; a user left out (a CSR
	// for another identity) has none.
	subjects := make(map[string]map[string]string, len(users))
	for _, u := range users {
		r := t.rendered(u)
		out = append(out, r)
		if isToken(u) {
			manifests = append(manifests,
				kube.Manifest("v1", "ServiceAccount", kube.Meta{Name: r.GetServiceAccount(), Namespace: t.namespace, Labels: t.labels()}, nil))
			subjects[u.GetName()] = map[string]string{"kind": "ServiceAccount", "name": r.GetServiceAccount(), "namespace": t.namespace}
			continue
		}
		if t.checkCSR("", u) != nil {
			continue
		}
		cn, _ := kube.UserIdentity(t.project, t.lc, u.GetName())
		manifests = append(manifests, kube.CSRManifestWithLifetime(r.GetCsrName(), []byte(u.GetCertificate()), t.labels(), t.certLifetime))
		subjects[u.GetName()] = map[string]string{"kind": "User", "apiGroup": rbacGroup, "name": cn}
	}
	for _, p := range perms {
		manifests = append(manifests, t.role(p, grantees(users, subjects, p))...)
	}
	return manifests, out
}

// grantees are the subjects permission p is bound to, in the users'
// order: those of the users it names, or of every user when it names none.
func grantees(users []*userv1.User, subjects map[string]map[string]string, p *userv1.UserPermission) []map[string]string {
	out := make([]map[string]string, 0, len(users))
	for _, u := range users {
		s, ok := subjects[u.GetName()]
		if ok && (len(p.GetUsers()) == 0 || slices.Contains(p.GetUsers(), u.GetName())) {
			out = append(out, s)
		}
	}
	return out
}

// role is a permission's Role (ClusterRole when it is cluster-wide) and
// the binding of the same name that grants it to subjects. EMCO's "*" in
// the namespace below level privileged is namespace admin's rules.
func (t target) role(p *userv1.UserPermission, subjects []map[string]string) []string {
	roleKind, bindingKind := "Role", "RoleBinding"
	name := p.GetPermissionName()
	switch p.GetNamespace() {
	case "":
		roleKind, bindingKind = "ClusterRole", "ClusterRoleBinding"
		name = t.shared(name)
	case t.namespace:
		// The namespace is the logical cloud's only: the name is its own.
	default:
		name = t.shared(name)
	}
	meta := kube.Meta{Name: name, Namespace: p.GetNamespace(), Labels: t.labels()}
	rules := []any{map[string]any{"apiGroups": p.GetApiGroups(), "resources": p.GetResources(), "verbs": p.GetVerbs()}}
	if p.GetNamespace() == t.namespace && t.level != kube.LevelPrivileged && kube.IsNamespaceAdmin(p.GetApiGroups(), p.GetResources(), p.GetVerbs()) {
		// EMCO's "*" below level privileged: namespace admin, less what
		// DCM keeps (kube.NamespaceAdminRules).
		rules = kube.NamespaceAdminRules()
	}
	return []string{
		kube.Manifest(rbacGroup+"/v1", roleKind, meta, map[string]any{"rules": rules}),
		kube.Manifest(rbacGroup+"/v1", bindingKind, meta, map[string]any{
			"roleRef":  map[string]string{"apiGroup": rbacGroup, "kind": roleKind, "name": name},
			"subjects": subjects,
		}),
	}
}
