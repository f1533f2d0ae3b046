// Package user implements the user service: the users of each logical
// cloud and their permissions (RBAC rules, checked with Kubernetes' rules
// and the logical cloud's level), and what applying a logical cloud puts
// on its clusters for them (CSRs or ServiceAccounts, Roles and bindings).
// It makes and keeps, sealed, the private keys of certificate users who
// brought no CSR, and must never log them. It asks core, over gRPC,
// whether a logical cloud exists before it stores or answers anything
// under it on its public API; its internal API (create, render,
// credentials, purge) never calls core first: core sends the namespace and
// level, and a create checks its parent only after the insert. It does not
// talk to clusters.
package user

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/util/validation"

	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// Service is the user service's gRPC API.
type Service struct {
	userv1.UnimplementedUserServiceServer
	userv1.UnimplementedUserInternalServiceServer
	users *store.Records[*userv1.User]
	perms *store.Records[*userv1.UserPermission]
	// migrations marks the one-time changes of stored records done
	// (AssignOwners).
	migrations *store.Records[*typesv1.Metadata]
	// facts are the logical clouds as core told them (PutLogicalCloudFacts).
	facts *facts.Facts
	// certLifetime is what the rendered CSRs ask for (spec.expirationSeconds).
	certLifetime time.Duration
}

// New opens the service's collections on st, its copy of the logical
// clouds' facts among them. The CSRs it renders ask for certificates valid for
// certLifetime (DCM_CERT_LIFETIME, checked by kube.CheckCertLifetime).
func New(st *store.Store, certLifetime time.Duration) *Service {
	return &Service{
		users:        store.NewRecords(st, UsersCollection, "user", func() *userv1.User { return &userv1.User{} }),
		perms:        store.NewRecords(st, PermissionsCollection, "user permission", func() *userv1.UserPermission { return &userv1.UserPermission{} }),
		migrations:   store.NewRecords(st, MigrationsCollection, "migration", func() *typesv1.Metadata { return &typesv1.Metadata{} }),
		facts:        facts.Open(st, "user"),
		certLifetime: certLifetime,
	}
}

// Register serves the public and the internal API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	userv1.RegisterUserServiceServer(r, s)
	userv1.RegisterUserInternalServiceServer(r, s)
}

// told is the logical cloud as core sends it in an internal request (its
// level and namespace): the internal RPCs never ask core back.
// FailedPrecondition for an admin one, which has no users.
func (s *Service) told(project, lc, level, namespace string) (target, error) {
	if level == kube.LevelAdmin || namespace == "" {
		return target{}, errs.FailedPrecondition("logical cloud %q is an admin logical cloud: it has no users", lc)
	}
	// Core checked the name when it stored the logical cloud; a request
	// that did not come from there gets a clear refusal, not objects every
	// cluster refuses on every apply.
	if msgs := validation.IsDNS1123Label(namespace); len(msgs) > 0 {
		return target{}, errs.Invalid("namespace", "%q is not a namespace name: %s", namespace, strings.Join(msgs, "; "))
	}
	return target{project: project, lc: lc, namespace: namespace, level: level, certLifetime: s.certLifetime}, nil
}

// cloud reads the facts core told of the logical cloud: NotFound if the
// service has none or it is being deleted.
func (s *Service) cloud(ctx context.Context, project, lc string) (*typesv1.LogicalCloudFacts, error) {
	return s.facts.Parent(ctx, project, lc)
}

// exists is cloud as a CreateChecked check.
func (s *Service) exists(project, lc string) func(context.Context) error {
	return s.facts.Check(project, lc)
}

// Facts is the service's copy of the logical clouds' facts, which core
// tells it through the facts contract (platform/facts.Serve).
func (s *Service) Facts() *facts.Facts { return s.facts }

// CreateUser implements userv1.UserInternalServiceServer. Core calls it
// while it creates the logical cloud (never for an admin one), so there is
// no pre-check: the after-insert check (CreateChecked) keeps an orphan out
// (docs/logical-clouds.md, "No orphans").
func (s *Service) CreateUser(ctx context.Context, req *userv1.CreateUserRequest) (*userv1.CreateUserResponse, error) {
	u := req.GetUser()
	if u.GetType() == "" {
		u.Type = typeCertificate
	}
	project, lc := req.GetProject(), req.GetLogicalCloud()
	switch c := u.GetCertificate(); {
	case c != "" && isToken(u):
		return nil, errs.Invalid("user.certificate", "a token user authenticates with a ServiceAccount token: it takes no certificate signing request")
	case c != "":
		if err := kube.CheckCSR("user.certificate", c, project, lc, u.GetName()); err != nil {
			return nil, err
		}
	}
	for i, p := range req.GetUserPermissions() {
		if len(p.GetUsers()) != 1 || p.GetUsers()[0] != u.GetName() {
			return nil, errs.Invalid(fmt.Sprintf("user_permissions[%d].users", i), "a permission created with its user names that user alone (%q), got %q", u.GetName(), p.GetUsers())
		}
	}
	parent := store.Key(project, lc)
	// The after-insert check reads the facts the permissions are checked
	// against: one read for the user and its permissions.
	var told *typesv1.LogicalCloudFacts
	check := func(ctx context.Context) (err error) {
		told, err = s.facts.Parent(ctx, project, lc)
		return err
	}
	if err := s.users.CreateChecked(ctx, store.Key(parent, u.GetName()), parent, u, check); err != nil {
		return nil, err
	}
	if err := s.createUsersPermissions(ctx, told, req.GetUserPermissions()); err != nil {
		// Core fails the create and removes the logical cloud's records;
		// the user and its permissions stored go at once.
		if derr := s.users.Delete(context.WithoutCancel(ctx), store.Key(parent, u.GetName())); derr != nil && errs.Code(derr) != codes.NotFound {
			return nil, errors.Join(err, derr)
		}
		return nil, err
	}
	return &userv1.CreateUserResponse{User: u}, nil
}

// createUsersPermissions stores permissions ps, each granted to the user
// just stored alone, checked against facts c: CreateUserPermission
// without its reads of the facts and of the grantee.
func (s *Service) createUsersPermissions(ctx context.Context, c *typesv1.LogicalCloudFacts, ps []*userv1.UserPermission) error {
	project, lc := c.GetProject(), c.GetName()
	parent := store.Key(project, lc)
	var made []string
	for _, p := range ps {
		id := store.Key(parent, p.GetPermissionName())
		err := checkPermission(ctx, c, p)
		if err == nil {
			err = s.perms.CreateChecked(ctx, id, parent, p, s.exists(project, lc))
		}
		if err != nil {
			// The permissions stored so far go again.
			for _, m := range made {
				if derr := s.perms.Delete(context.WithoutCancel(ctx), m); derr != nil && errs.Code(derr) != codes.NotFound {
					err = errors.Join(err, derr)
				}
			}
			return err
		}
		made = append(made, id)
	}
	return nil
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
	us, next, err := s.users.ListPage(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()), store.PageOf(req))
	if err != nil {
		return nil, err
	}
	return &userv1.ListUsersResponse{Users: us, NextPageToken: next}, nil
}

// DeleteUser implements userv1.UserServiceServer (core calls it for
// DELETE .../users/{user}). The user's permissions go first: one granted
// to it alone is deleted, one it shares no longer names it. Never left
// naming no user, which would grant it to every user, nor kept for a
// user of the same name added later. A retry after a failure finds
// nothing left to strip.
func (s *Service) DeleteUser(ctx context.Context, req *userv1.DeleteUserRequest) (*userv1.DeleteUserResponse, error) {
	project, lc, name := req.GetProject(), req.GetLogicalCloud(), req.GetName()
	if _, err := s.cloud(ctx, project, lc); err != nil {
		return nil, err
	}
	id := store.Key(project, lc, name)
	if _, err := s.users.Get(ctx, id); err != nil {
		return nil, err
	}
	perms, err := s.perms.List(ctx, store.Key(project, lc))
	if err != nil {
		return nil, err
	}
	for _, p := range perms {
		if !slices.Contains(p.GetUsers(), name) {
			continue
		}
		pid := store.Key(project, lc, p.GetPermissionName())
		if len(p.GetUsers()) == 1 {
			err = s.perms.Delete(ctx, pid)
		} else {
			_, err = s.perms.Modify(ctx, pid, func(cur *userv1.UserPermission) error {
				if rest := slices.DeleteFunc(slices.Clone(cur.GetUsers()), func(u string) bool { return u == name }); len(rest) > 0 {
					cur.Users = rest
					return nil
				}
				return errs.Aborted("permission %q changed while user %q was deleted; retry", p.GetPermissionName(), name)
			})
		}
		if err != nil && errs.Code(err) != codes.NotFound {
			return nil, err
		}
	}
	if err := s.users.Delete(ctx, id); err != nil {
		return nil, err
	}
	return &userv1.DeleteUserResponse{}, nil
}

// checkPermission checks a permission against the logical cloud's level
// and what the caller may grant (kube.CheckGrant), and resolves its
// namespace; a metadata name must be the permission's.
func checkPermission(ctx context.Context, c *typesv1.LogicalCloudFacts, p *userv1.UserPermission) error {
	if md := p.GetMetadata(); md != nil && md.GetName() != p.GetPermissionName() {
		return errs.Invalid("user_permission.metadata.name", "must equal permission-name (%q), got %q", p.GetPermissionName(), md.GetName())
	}
	ns, err := kube.CheckGrant("user_permission", c.GetLevel(), c.GetNamespace(), kube.Grant{
		Namespace: p.GetNamespace(), APIGroups: p.GetApiGroups(), Resources: p.GetResources(), Verbs: p.GetVerbs(),
	}, server.MayGrant(ctx))
	if err != nil {
		return err
	}
	p.Namespace = ns
	return nil
}

// checkGrantees requires every user permission p names to be a user of
// the logical cloud (400 naming the entry): a permission is granted to
// users that exist, not kept for a name someone may take later. A user
// deleted afterwards simply holds nothing (render binds only users that
// exist).
func (s *Service) checkGrantees(ctx context.Context, project, lc string, p *userv1.UserPermission) error {
	for i, name := range p.GetUsers() {
		_, err := s.users.Get(ctx, store.Key(project, lc, name))
		if errs.Code(err) == codes.NotFound {
			return errs.Invalid(fmt.Sprintf("user_permission.users[%d]", i), "logical cloud %q has no user %q", lc, name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// CreateUserPermission implements userv1.UserServiceServer.
func (s *Service) CreateUserPermission(ctx context.Context, req *userv1.CreateUserPermissionRequest) (*userv1.CreateUserPermissionResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	p := req.GetUserPermission()
	if err := checkPermission(ctx, c, p); err != nil {
		return nil, err
	}
	if err := s.checkGrantees(ctx, project, lc, p); err != nil {
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
	ps, next, err := s.perms.ListPage(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()), store.PageOf(req))
	if err != nil {
		return nil, err
	}
	return &userv1.ListUserPermissionsResponse{UserPermissions: ps, NextPageToken: next}, nil
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
	if err := checkPermission(ctx, c, p); err != nil {
		return nil, err
	}
	if err := s.checkGrantees(ctx, req.GetProject(), req.GetLogicalCloud(), p); err != nil {
		return nil, err
	}
	_, err = s.perms.Modify(ctx, store.Key(req.GetProject(), req.GetLogicalCloud(), req.GetName()), func(cur *userv1.UserPermission) error {
		cur.Namespace, cur.ApiGroups, cur.Resources, cur.Verbs = p.GetNamespace(), p.GetApiGroups(), p.GetResources(), p.GetVerbs()
		cur.Metadata = p.GetMetadata()
		// A body without users keeps those the permission has: a client
		// that does not know the field (EMCO's dialect, an old one) never
		// widens one user's permission to every user.
		if len(p.GetUsers()) > 0 {
			cur.Users = p.GetUsers()
		}
		p.Users = cur.GetUsers()
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

// keySecret names the sealed private key of a user whose CSR the service
// made.
const keySecret = "key"

// csrAttempts bounds how often a render reads a user again after another
// render stored its CSR first (once is enough: users change no other way).
const csrAttempts = 3

// withCSR returns user id with a CSR that asks for its identity of
// kube.UserIdentity: the stored one if it does; else, if the service holds
// the user's key, one made with that key (the user's CSR from before DCM
// scoped identities, whose common name was the user name, gets the new
// subject and keeps its public key); else, if it has none, a new key and
// CSR. What it makes is stored, the key sealed, conditionally on the
// version read; when another render stored one first, that one is read
// back and used. So a user's CSR changes only when its subject must, as a
// CertificateSigningRequest's spec cannot change on a cluster (the new one
// has a new name too). A CSR the user brought is returned as it is, even
// one render will leave out (target.checkCSR): its key is not here.
func (s *Service) withCSR(ctx context.Context, id string, t target) (*userv1.User, error) {
	for range csrAttempts {
		cur, err := s.users.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		u := cur.Msg
		if u.GetCertificate() != "" && t.checkCSR("", u) == nil {
			return u, nil
		}
		csr, secrets, err := s.makeCSR(ctx, id, t, u)
		if err != nil || csr == nil {
			return u, err
		}
		u.Certificate = string(csr)
		err = s.users.Update(ctx, id, cur.Version, u, secrets...)
		switch {
		case err == nil:
			return u, nil
		case errs.Code(err) != codes.Aborted:
			return nil, err
		}
	}
	return nil, errs.Aborted("user %q kept changing while its key was made; retry", id)
}

// makeCSR makes u's CSR for its identity: with the key the service holds
// for it, or with a new key when it has none yet (returned to be stored).
// It makes none (nil) for a user who brought a CSR: the service has no
// key for it.
func (s *Service) makeCSR(ctx context.Context, id string, t target, u *userv1.User) ([]byte, []store.Secret, error) {
	cn, group := kube.UserIdentity(t.project, t.lc, u.GetName())
	if u.GetCertificate() == "" {
		csr, key, err := kube.NewCSR(cn, group)
		if err != nil {
			return nil, nil, errs.Internal(err, "make a key for user %q", u.GetName())
		}
		return csr, []store.Secret{{Name: keySecret, Value: key}}, nil
	}
	keyPEM, err := s.users.Secret(ctx, id, keySecret)
	switch {
	case errs.Code(err) == codes.NotFound:
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, nil, errs.Internal(err, "read the key of user %q", u.GetName())
	}
	csr, err := kube.SignCSR(key, cn, group)
	if err != nil {
		return nil, nil, errs.Internal(err, "make the CSR of user %q again", u.GetName())
	}
	return csr, nil, nil
}

// parseKey reads a PKCS #8 PEM private key as the service stores them.
func parseKey(keyPEM []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM private key")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", key)
	}
	return signer, nil
}

// RenderUsers implements userv1.UserInternalServiceServer. Rendering twice
// gives the same manifests: keys and CSRs are made at the first render only
// (and made again once for a CSR from before DCM scoped identities,
// withCSR). The level and namespace are core's, from the request.
func (s *Service) RenderUsers(ctx context.Context, req *userv1.RenderUsersRequest) (*userv1.RenderUsersResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	t, err := s.told(project, lc, req.GetLevel(), req.GetNamespace())
	if err != nil {
		return nil, err
	}
	parent := store.Key(project, lc)
	users, err := s.users.List(ctx, parent)
	if err != nil {
		return nil, err
	}
	if len(users) == 0 {
		return nil, errs.FailedPrecondition("logical cloud %q has no user: add one before applying it", lc)
	}
	for i, u := range users {
		if isToken(u) || (u.GetCertificate() != "" && t.checkCSR("", u) == nil) {
			continue
		}
		if users[i], err = s.withCSR(ctx, store.Key(parent, u.GetName()), t); err != nil {
			return nil, err
		}
	}
	perms, err := s.perms.List(ctx, parent)
	if err != nil {
		return nil, err
	}
	manifests, rendered := t.render(users, perms)
	return &userv1.RenderUsersResponse{Manifests: manifests, Users: rendered}, nil
}

// GetUserCredentials implements userv1.UserInternalServiceServer. The
// level and namespace are core's, from the request.
func (s *Service) GetUserCredentials(ctx context.Context, req *userv1.GetUserCredentialsRequest) (*userv1.GetUserCredentialsResponse, error) {
	project, lc, name := req.GetProject(), req.GetLogicalCloud(), req.GetName()
	t, err := s.told(project, lc, req.GetLevel(), req.GetNamespace())
	if err != nil {
		return nil, err
	}
	id := store.Key(project, lc, name)
	u, err := s.users.Get(ctx, id)
	if errs.Code(err) == codes.NotFound {
		return nil, errs.NotFound("logical cloud %q has no user %q", lc, name)
	}
	if err != nil {
		return nil, err
	}
	out := &userv1.GetUserCredentialsResponse{User: t.rendered(u.Msg)}
	if isToken(u.Msg) {
		return out, nil
	}
	if u.Msg.GetCertificate() == "" {
		return nil, errs.FailedPrecondition("user %q has no key yet: the logical cloud has not been applied yet", name)
	}
	// A user who brought a CSR has no key here: it holds it.
	key, err := s.users.Secret(ctx, id, keySecret)
	switch {
	case err == nil:
		out.KeyPem = key
	case errs.Code(err) != codes.NotFound:
		return nil, err
	}
	// A CSR from before DCM scoped user identities asks for another one.
	switch bad := t.checkCSR("certificate", u.Msg); {
	case bad == nil:
	case key != nil:
		return nil, errs.FailedPrecondition("user %q has no certificate for its identity yet: the logical cloud's next update (POST .../update) makes and applies its new certificate signing request", name)
	default:
		return nil, errs.FailedPrecondition("user %q has no certificate on the clusters: its certificate signing request, brought before DCM scoped user identities, is not sent to them (%s)",
			name, bad.Error())
	}
	return out, nil
}

// PurgeLogicalCloud implements userv1.UserInternalServiceServer.
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

// ListLogicalCloudPermissions implements userv1.UserInternalServiceServer:
// the permissions ListUserPermissions reads, all of them and ordered by
// name, without asking core whether the logical cloud exists (core asks,
// to show them in its answers).
func (s *Service) ListLogicalCloudPermissions(ctx context.Context, req *userv1.ListLogicalCloudPermissionsRequest) (*userv1.ListLogicalCloudPermissionsResponse, error) {
	ps, err := s.perms.List(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()))
	if err != nil {
		return nil, err
	}
	return &userv1.ListLogicalCloudPermissionsResponse{UserPermissions: ps}, nil
}

// ListLogicalCloudsPermissions implements userv1.UserInternalServiceServer:
// ListLogicalCloudPermissions for every logical cloud named, in one call
// (core shows a page of logical clouds with their permissions).
func (s *Service) ListLogicalCloudsPermissions(ctx context.Context, req *userv1.ListLogicalCloudsPermissionsRequest) (*userv1.ListLogicalCloudsPermissionsResponse, error) {
	if len(req.GetLogicalClouds()) > store.MaxPageSize {
		return nil, errs.Invalid("logical-clouds", "at most %d logical clouds at once, got %d", store.MaxPageSize, len(req.GetLogicalClouds()))
	}
	// One store command for the page, not one per logical cloud.
	keys := make([]string, 0, len(req.GetLogicalClouds()))
	for _, lc := range req.GetLogicalClouds() {
		keys = append(keys, store.Key(req.GetProject(), lc))
	}
	byKey, err := s.perms.ListUnder(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := &userv1.ListLogicalCloudsPermissionsResponse{}
	for i, lc := range req.GetLogicalClouds() {
		out.LogicalClouds = append(out.LogicalClouds, &userv1.LogicalCloudPermissions{LogicalCloud: lc, UserPermissions: byKey[keys[i]]})
	}
	return out, nil
}
