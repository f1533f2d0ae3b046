package core

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/logging"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// Users after creation (docs/logical-clouds.md, "Users"): the users
// routes are core's, since a user spans the user service (the user and
// its permissions) and the quota service (its quota "<user>-quota"), and
// the logical cloud's facts (spec.users) change with it. Adding and
// removing hold the logical cloud's transition lock; the clusters follow
// at the next .../update. The user service's records are the users:
// spec.users is set from them after each change (a record from before
// spec.users gets it at its first change).

// Users is the users routes of the logical clouds (LogicalCloudService's
// .../users) and seed 002's adding of users through POST
// .../logical-clouds.
type Users struct {
	*cloudReader
	locks         *keyLocks
	users         userv1.UserServiceClient
	usersInternal userv1.UserInternalServiceClient
	quotas        quotav1.QuotaServiceClient
	facts         *Facts
	log           *zap.Logger
	tenancy       Tenancy
}

// userQuota names the quota a user's "quota" makes (addFlatUser).
func userQuota(user string) string { return user + "-quota" }

// usersOf are the names of the users of logical cloud c, ordered: its
// spec.users, or for a record from before spec.users the one user of
// spec.user. An admin logical cloud has none.
func usersOf(c *corev1.LogicalCloud) []string {
	switch spec := c.GetSpec(); {
	case spec.GetLevel() == levelAdmin:
		return nil
	case len(spec.GetUsers()) > 0:
		return slices.Clone(spec.GetUsers())
	case spec.GetUser().GetUserName() != "":
		return []string{spec.GetUser().GetUserName()}
	}
	return nil
}

// userNames are the names of the users p holds, ordered.
func userNames(users []*userv1.User) []string {
	out := make([]string, 0, len(users))
	for _, u := range users {
		out = append(out, u.GetName())
	}
	slices.Sort(out)
	return out
}

// storedUsers reads every user of logical cloud lc of project from the
// user service, ordered by name.
func (s *Users) storedUsers(ctx context.Context, project, lc string) ([]*userv1.User, error) {
	var out []*userv1.User
	req := &userv1.ListUsersRequest{Project: project, LogicalCloud: lc, PageSize: store.MaxPageSize}
	for {
		resp, err := s.users.ListUsers(ctx, req)
		if err != nil {
			return nil, err
		}
		out = append(out, resp.GetUsers()...)
		if resp.GetNextPageToken() == "" {
			return out, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

// lockedCloud takes logical cloud lc's transition lock and reads it; the
// caller releases the lock with the function returned (nil on error).
func (s *Users) lockedCloud(ctx context.Context, project, lc string) (context.Context, *corev1.LogicalCloud, func(), error) {
	ctx, unlock, err := s.locks.lock(ctx, store.Key(project, lc), fmt.Sprintf("logical cloud %q", lc))
	if err != nil {
		return ctx, nil, nil, err
	}
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		unlock()
		return ctx, nil, nil, err
	}
	return ctx, c, unlock, nil
}

// CreateLogicalCloudUser implements corev1.LogicalCloudServiceServer.
func (s *Users) CreateLogicalCloudUser(ctx context.Context, req *corev1.CreateLogicalCloudUserRequest) (*corev1.CreateLogicalCloudUserResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	_, added, err := s.addUsers(ctx, project, lc, []*structpb.Struct{req.GetUser()}, func(int) string { return "user" })
	if err != nil {
		return nil, err
	}
	entries, err := s.userEntries(ctx, project, lc, added)
	if err != nil {
		return nil, err
	}
	return &corev1.CreateLogicalCloudUserResponse{Name: lc, User: added[0].GetName(), Message: addedMessage, Entry: entries[0]}, nil
}

// addedMessage is the message of an answer that added a user.
const addedMessage = "user added to the logical cloud; POST .../update gives it to the clusters"

// addToExisting is seed 002's POST .../logical-clouds naming existing
// logical cloud cur: it adds the body's users, each new, and takes no
// other field that would change the logical cloud (409 saying which). It
// answers the logical cloud as stored and the users added.
func (s *Users) addToExisting(ctx context.Context, req *corev1.CreateLogicalCloudRequest, cur *corev1.LogicalCloud) (*corev1.LogicalCloud, []*userv1.User, error) {
	name := req.GetName()
	switch {
	case req.GetResources() != nil:
		return nil, nil, errs.AlreadyExists("logical cloud %q exists: resources is for a new logical cloud only (its quotas are at .../cluster-quotas)", name)
	case req.GetDescription() != "" && req.GetDescription() != cur.GetMetadata().GetDescription():
		return nil, nil, errs.AlreadyExists("logical cloud %q exists with another description (change it with PUT .../logical-clouds/%s)", name, name)
	case strings.Join(labelsOf(req.GetClusterLabels()), ",") != "" && strings.Join(labelsOf(req.GetClusterLabels()), ",") != strings.Join(cur.GetSpec().GetClusterLabels(), ","):
		return nil, nil, errs.AlreadyExists("logical cloud %q exists with other cluster-labels (%q): add or remove cluster references instead", name, strings.Join(cur.GetSpec().GetClusterLabels(), ","))
	}
	users, field, err := userObjects(req.GetUser())
	if err != nil {
		return nil, nil, err
	}
	if len(users) == 0 {
		return nil, nil, errs.AlreadyExists("logical cloud %q already exists (to add a user to it, give the new user)", name)
	}
	fieldOf := func(int) string { return field }
	if req.GetUser().GetListValue() != nil {
		fieldOf = func(i int) string { return fmt.Sprintf("%s[%d]", field, i) }
	}
	return s.addUsers(ctx, req.GetProject(), name, users, fieldOf)
}

// labelsOf reads seed 002's comma-separated cluster-labels as planFlat
// stores them.
func labelsOf(s string) []string {
	var out []string
	for l := range strings.SplitSeq(s, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// addUsers adds seed 002's user objects (fieldOf(i) names the i-th in
// errors) to logical cloud lc of project, checked as at creation
// (addFlatUser): a name the logical cloud has is 409, anything else wrong
// 400 naming the field. The users, then their permissions and quotas are
// made; if one fails, what was made is removed again. Then spec.users and
// the facts follow. It answers the logical cloud as stored and the users
// added.
func (s *Users) addUsers(ctx context.Context, project, lc string, in []*structpb.Struct, fieldOf func(int) string) (*corev1.LogicalCloud, []*userv1.User, error) {
	ctx, c, unlock, err := s.lockedCloud(ctx, project, lc)
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	if c.GetSpec().GetLevel() == levelAdmin {
		return nil, nil, errs.Invalid(fieldOf(0), "an admin logical cloud uses the clusters' admin access: it has no users")
	}
	have, err := s.storedUsers(ctx, project, lc)
	if err != nil {
		return nil, nil, err
	}
	p := &plan{project: project, lc: c, users: have}
	g := grants{Tenancy: s.tenancy, mayGrant: server.MayGrant(ctx)}
	for i, u := range in {
		name, err := stringField(fieldOf(i)+".name", u.GetFields()["name"])
		if err != nil {
			return nil, nil, err
		}
		if slices.ContainsFunc(have, func(o *userv1.User) bool { return o.GetName() == name }) {
			return nil, nil, errs.AlreadyExists("logical cloud %q already has user %q (GET .../logical-clouds/%s/users/%s)", lc, name, lc, name)
		}
		// The quota service holds the users' summed quotas to the
		// maximum when makeUsers creates the new user's quota.
		if _, err := addFlatUser(p, fieldOf(i), u, g); err != nil {
			return nil, nil, err
		}
	}
	added := p.users[len(have):]
	if err := s.makeUsers(ctx, p, added); err != nil {
		s.unmakeUsers(ctx, project, lc, added)
		return nil, nil, err
	}
	c, err = s.setUsers(ctx, project, lc)
	if err != nil {
		s.unmakeUsers(ctx, project, lc, added)
		return nil, nil, err
	}
	return c, added, nil
}

// makeUsers makes users, then plan p's permissions and quotas (those of
// users), in the user and quota services.
func (s *Users) makeUsers(ctx context.Context, p *plan, users []*userv1.User) error {
	lc := p.lc.GetMetadata().GetName()
	for _, u := range users {
		if _, err := s.usersInternal.CreateUser(ctx, &userv1.CreateUserRequest{Project: p.project, LogicalCloud: lc, User: u}); err != nil {
			return err
		}
	}
	for _, perm := range p.perms {
		if _, err := s.users.CreateUserPermission(ctx, &userv1.CreateUserPermissionRequest{
			Project: p.project, LogicalCloud: lc, UserPermission: perm}); err != nil {
			if errs.Code(err) == codes.AlreadyExists {
				return errs.AlreadyExists("logical cloud %q has a permission %q already: the user's permissions are named after it (.../user-permissions)", lc, perm.GetPermissionName())
			}
			return err
		}
	}
	for i, q := range p.quotas {
		if _, err := s.quotas.CreateQuota(ctx, &quotav1.CreateQuotaRequest{Project: p.project, LogicalCloud: lc, Quota: q}); err != nil {
			return inBody(err, "quota.spec", p.quotaFields[i])
		}
	}
	return nil
}

// unmakeUsers removes users (their permissions with them) and their
// quotas again after a failed add; what cannot be removed is logged.
func (s *Users) unmakeUsers(ctx context.Context, project, lc string, users []*userv1.User) {
	ctx = context.WithoutCancel(ctx)
	for _, u := range users {
		if err := s.removeUser(ctx, project, lc, u.GetName()); err != nil {
			logging.FromOr(ctx, s.log).Warn("remove a user whose addition failed", zap.String("logical_cloud", store.Key(project, lc)),
				zap.String("user", u.GetName()), zap.Error(err))
		}
	}
}

// removeUser removes user name of logical cloud lc in the user service
// (its permissions with it) and its quota in the quota service; either
// being gone already is no error.
func (s *Users) removeUser(ctx context.Context, project, lc, name string) error {
	_, err := s.users.DeleteUser(ctx, &userv1.DeleteUserRequest{Project: project, LogicalCloud: lc, Name: name})
	if err != nil && errs.Code(err) != codes.NotFound {
		return err
	}
	_, err = s.quotas.DeleteQuota(ctx, &quotav1.DeleteQuotaRequest{Project: project, LogicalCloud: lc, Name: userQuota(name)})
	if err != nil && errs.Code(err) != codes.NotFound {
		return err
	}
	return nil
}

// setUsers stores the user service's users of logical cloud lc as its
// spec.users (and spec.user's one user, if that one is gone, the first
// of them), and tells the services the facts; a failed tell is logged
// and left to the reconcile. Called under the transition lock.
func (s *Users) setUsers(ctx context.Context, project, lc string) (*corev1.LogicalCloud, error) {
	users, err := s.storedUsers(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	c, err := s.clouds.Modify(ctx, store.Key(project, lc), func(c *corev1.LogicalCloud) error {
		c.Spec.Users = userNames(users)
		if len(users) > 0 && !slices.Contains(c.Spec.Users, c.GetSpec().GetUser().GetUserName()) {
			c.Spec.User = &corev1.LogicalCloudUser{UserName: users[0].GetName(), Type: users[0].GetType()}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	clusters, err := s.facts.clustersOf(ctx, project, lc)
	if err == nil {
		err = s.facts.tell(ctx, factsOf(project, c, clusters))
	}
	if err != nil {
		s.log.Warn("tell the services a logical cloud's users; the reconcile will",
			zap.String("logical_cloud", store.Key(project, lc)), zap.Error(err))
	}
	return proto.CloneOf(c), nil
}

// DeleteLogicalCloudUser implements corev1.LogicalCloudServiceServer: the
// user, the permissions granted to it alone (the user service) and its
// quota go; the clusters lose them at the next .../update. The last user
// stays: 409 LAST_USER.
func (s *Users) DeleteLogicalCloudUser(ctx context.Context, req *corev1.DeleteLogicalCloudUserRequest) (*corev1.DeleteLogicalCloudUserResponse, error) {
	project, lc, name := req.GetProject(), req.GetLogicalCloud(), req.GetName()
	ctx, c, unlock, err := s.lockedCloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	defer unlock()
	users, err := s.storedUsers(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	switch names := userNames(users); {
	case !slices.Contains(names, name):
		if slices.Contains(usersOf(c), name) {
			// A removal that failed after the user service's: the record
			// follows now.
			if _, err := s.setUsers(ctx, project, lc); err != nil {
				return nil, err
			}
		}
		return nil, errs.NotFound("logical cloud %q has no user %q", lc, name)
	case len(names) == 1:
		return nil, lastUser(lc, name)
	}
	if err := s.removeUser(ctx, project, lc, name); err != nil {
		return nil, err
	}
	if _, err := s.setUsers(ctx, project, lc); err != nil {
		return nil, err
	}
	return &corev1.DeleteLogicalCloudUserResponse{}, nil
}

// lastUser refuses to remove user, the last of logical cloud lc.
func lastUser(lc, user string) error {
	return errs.Because(errs.ReasonLastUser, "%q is the last user of logical cloud %q: a logical cloud keeps at least one user (add another first; the last goes with the logical cloud, DELETE .../logical-clouds/%s)", user, lc, lc)
}

// DeleteLogicalCloudUsers implements corev1.LogicalCloudServiceServer:
// removing every user would leave none, so it is 409 LAST_USER for a
// logical cloud that has users.
func (s *Users) DeleteLogicalCloudUsers(ctx context.Context, req *corev1.DeleteLogicalCloudUsersRequest) (*corev1.DeleteLogicalCloudUsersResponse, error) {
	c, err := s.cloud(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	names := usersOf(c)
	if len(names) == 0 {
		return &corev1.DeleteLogicalCloudUsersResponse{}, nil
	}
	return nil, errs.Because(errs.ReasonLastUser, "logical cloud %q keeps at least one user: delete users one by one (DELETE .../users/{user}); the last goes with the logical cloud", req.GetLogicalCloud())
}

// ListLogicalCloudUsers implements corev1.LogicalCloudServiceServer.
func (s *Users) ListLogicalCloudUsers(ctx context.Context, req *corev1.ListLogicalCloudUsersRequest) (*corev1.ListLogicalCloudUsersResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	if c.GetSpec().GetLevel() == levelAdmin {
		return &corev1.ListLogicalCloudUsersResponse{Users: []*corev1.LogicalCloudUserEntry{}}, nil
	}
	resp, err := s.users.ListUsers(ctx, &userv1.ListUsersRequest{Project: project, LogicalCloud: lc, PageSize: req.GetPageSize(), PageToken: req.GetPageToken()})
	if err != nil {
		return nil, err
	}
	entries, err := s.userEntries(ctx, project, lc, resp.GetUsers())
	if err != nil {
		return nil, err
	}
	return &corev1.ListLogicalCloudUsersResponse{Users: entries, NextPageToken: resp.GetNextPageToken()}, nil
}

// GetLogicalCloudUser implements corev1.LogicalCloudServiceServer.
func (s *Users) GetLogicalCloudUser(ctx context.Context, req *corev1.GetLogicalCloudUserRequest) (*corev1.GetLogicalCloudUserResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if _, err := s.cloud(ctx, project, lc); err != nil {
		return nil, err
	}
	u, err := s.users.GetUser(ctx, &userv1.GetUserRequest{Project: project, LogicalCloud: lc, Name: req.GetName()})
	if err != nil {
		return nil, err
	}
	entries, err := s.userEntries(ctx, project, lc, []*userv1.User{u.GetUser()})
	if err != nil {
		return nil, err
	}
	return &corev1.GetLogicalCloudUserResponse{User: entries[0]}, nil
}

// userEntries shows users of logical cloud lc with the permissions each
// holds (those naming it and those naming no user, by name) and the hard
// map of its quota "<user>-quota" (none if there is no such quota).
func (s *Users) userEntries(ctx context.Context, project, lc string, users []*userv1.User) ([]*corev1.LogicalCloudUserEntry, error) {
	resp, err := s.usersInternal.ListLogicalCloudPermissions(ctx, &userv1.ListLogicalCloudPermissionsRequest{Project: project, LogicalCloud: lc})
	if err != nil {
		return nil, err
	}
	perms := byName(resp.GetUserPermissions())
	out := make([]*corev1.LogicalCloudUserEntry, 0, len(users))
	for _, u := range users {
		e := &corev1.LogicalCloudUserEntry{Name: u.GetName(), Type: u.GetType(), Certificate: u.GetCertificate(),
			Permissions: []*userv1.UserPermission{}}
		for _, p := range perms {
			if len(p.GetUsers()) == 0 || slices.Contains(p.GetUsers(), u.GetName()) {
				e.Permissions = append(e.Permissions, p)
			}
		}
		q, err := s.quotas.GetQuota(ctx, &quotav1.GetQuotaRequest{Project: project, LogicalCloud: lc, Name: userQuota(u.GetName())})
		switch {
		case err == nil:
			e.Quota = q.GetQuota().GetSpec()
		case errs.Code(err) != codes.NotFound:
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
