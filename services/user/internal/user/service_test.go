package user_test

import (
	"context"
	"crypto"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/facts/factstest"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/user/internal/user"
)

// client is the user service's public and internal API, the internal one
// called as core calls it: the logical cloud's level and namespace, as
// core holds them, go in the request, and the service may not call core
// back meanwhile (a render or credentials read that did fails the test).
type client struct {
	userv1.UserServiceClient
	userv1.UserInternalServiceClient
	t    *testing.T
	core *factstest.Clouds
}

// told runs call with core forbidden, after filling in what core holds
// of project/lc; a logical cloud core does not hold is NotFound from
// core, before any call to the service.
func (c client) told(project, lc string, fill func(level, namespace string), call func() error) error {
	spec, err := c.core.Spec(project, lc)
	if err != nil {
		return err
	}
	fill(spec.GetLevel(), spec.GetNamespace())
	return call()
}

func (c client) RenderUsers(ctx context.Context, req *userv1.RenderUsersRequest, opts ...grpc.CallOption) (resp *userv1.RenderUsersResponse, err error) {
	err = c.told(req.GetProject(), req.GetLogicalCloud(), func(level, ns string) { req.Level, req.Namespace = level, ns }, func() error {
		resp, err = c.UserInternalServiceClient.RenderUsers(ctx, req, opts...)
		return err
	})
	return resp, err
}

func (c client) GetUserCredentials(ctx context.Context, req *userv1.GetUserCredentialsRequest, opts ...grpc.CallOption) (resp *userv1.GetUserCredentialsResponse, err error) {
	err = c.told(req.GetProject(), req.GetLogicalCloud(), func(level, ns string) { req.Level, req.Namespace = level, ns }, func() error {
		resp, err = c.UserInternalServiceClient.GetUserCredentials(ctx, req, opts...)
		return err
	})
	return resp, err
}

// serve serves the user service on a fresh store, with core standing in
// for the logical clouds.
func serve(t *testing.T) (client, *factstest.Clouds) {
	t.Helper()
	c, core, _ := serveStore(t)
	return c, core
}

// serveStore is serve, with the store the service keeps its users in.
func serveStore(t *testing.T) (client, *factstest.Clouds, *store.Store) {
	t.Helper()
	return serveStoreWith(t, week)
}

// serveStoreWith is serveStore with CSRs asking for certLifetime.
func serveStoreWith(t *testing.T, certLifetime time.Duration) (client, *factstest.Clouds, *store.Store) {
	t.Helper()
	core := factstest.New(t)
	var st *store.Store
	conn := servertest.Serve(t, func(s *store.Store) []server.Service {
		st = s
		return []server.Service{user.New(keep(core, s, "user"), certLifetime)}
	})
	return client{userv1.NewUserServiceClient(conn), userv1.NewUserInternalServiceClient(conn), t, core}, core, st
}

func TestRenderUsers(t *testing.T) {
	t.Parallel()
	c, core := serve(t)
	ctx := context.Background()
	core.Add("p", "lc", kube.LevelStandard, "ns-1")
	createUser := func(lc string, u *userv1.User) error {
		_, err := c.CreateUser(ctx, &userv1.CreateUserRequest{Project: "p", LogicalCloud: lc, User: u})
		return err
	}
	carolCSR := csrPEM(t, "p", "lc", "carol")
	require.NoError(t, createUser("lc", &userv1.User{Name: "alice"}))
	require.NoError(t, createUser("lc", &userv1.User{Name: "bob", Type: "token"}))
	require.NoError(t, createUser("lc", &userv1.User{Name: "carol", Certificate: carolCSR}))
	err := createUser("lc", &userv1.User{Name: "dan", Type: "token", Certificate: csrPEM(t, "p", "lc", "dan")})
	require.Equal(t, "user.certificate", errs.FieldOf(status.Convert(err)), "a token user takes no CSR: %v", err)
	_, err = c.CreateUserPermission(ctx, &userv1.CreateUserPermissionRequest{Project: "p", LogicalCloud: "lc", UserPermission: &userv1.UserPermission{
		PermissionName: "pods", ApiGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}})
	require.NoError(t, err)

	creds := func(name string) (*userv1.GetUserCredentialsResponse, error) {
		return c.GetUserCredentials(ctx, &userv1.GetUserCredentialsRequest{Project: "p", LogicalCloud: "lc", Name: name})
	}
	_, err = creds("alice")
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "no key before the first render: %v", err)

	// Concurrent first renders make alice's key once: all answer the same.
	const renders = 8
	got := make([]*userv1.RenderUsersResponse, renders)
	failed := make([]error, renders)
	var wg sync.WaitGroup
	for i := range renders {
		wg.Go(func() {
			got[i], failed[i] = c.RenderUsers(ctx, &userv1.RenderUsersRequest{Project: "p", LogicalCloud: "lc"})
		})
	}
	wg.Wait()
	for i := range renders {
		require.NoError(t, failed[i])
		require.Equal(t, got[0].GetManifests(), got[i].GetManifests(), "render %d", i)
	}
	again, err := c.RenderUsers(ctx, &userv1.RenderUsersRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Equal(t, got[0].GetManifests(), again.GetManifests(), "a later render is byte-identical")
	require.Equal(t, []string{
		"CertificateSigningRequest dcm.p.lc.alice",
		"ServiceAccount ns-1/bob",
		"CertificateSigningRequest dcm.p.lc.carol",
		"Role ns-1/pods",
		"RoleBinding ns-1/pods",
	}, outline(t, "p", "lc", again.GetManifests()), "a token user has its ServiceAccount only: no legacy token Secret")
	require.Equal(t, []map[string]string{
		{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "dcm:p:lc:alice"},
		{"kind": "ServiceAccount", "name": "bob", "namespace": "ns-1"},
		{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "dcm:p:lc:carol"},
	}, decode(t, again.GetManifests()[4]).Subjects)

	// alice's CSR is stored (and shown), and her sealed key is its key.
	alice, err := c.GetUser(ctx, &userv1.GetUserRequest{Project: "p", LogicalCloud: "lc", Name: "alice"})
	require.NoError(t, err)
	aliceCSR := decode(t, again.GetManifests()[0])
	require.Equal(t, int64(week/time.Second), aliceCSR.Spec.ExpirationSeconds, "DCM_CERT_LIFETIME")
	csr := aliceCSR.Spec.Request
	require.Equal(t, string(csr), alice.GetUser().GetCertificate())
	require.NoError(t, kube.CheckCSR("c", string(csr), "p", "lc", "alice"))
	require.Equal(t, pkix.Name{CommonName: "dcm:p:lc:alice", Organization: []string{"dcm:p:lc"}}.String(), parseCSR(t, string(csr)).Subject.String())
	ac, err := creds("alice")
	require.NoError(t, err)
	require.True(t, proto.Equal(&userv1.RenderedUser{Name: "alice", Type: "certificate", CsrName: "dcm.p.lc.alice"}, ac.GetUser()), "%v", ac.GetUser())
	requireKeyOf(t, string(csr), ac.GetKeyPem())
	require.True(t, proto.Equal(again.GetUsers()[0], ac.GetUser()), "as RenderUsers shows it")

	// carol brought her CSR: it is rendered as given, and no key is held.
	require.Equal(t, carolCSR, string(decode(t, again.GetManifests()[2]).Spec.Request))
	cc, err := creds("carol")
	require.NoError(t, err)
	require.Empty(t, cc.GetKeyPem())
	bc, err := creds("bob")
	require.NoError(t, err)
	require.True(t, proto.Equal(&userv1.RenderedUser{Name: "bob", Type: "token", Namespace: "ns-1", ServiceAccount: "bob"}, bc.GetUser()), "%v", bc.GetUser())
	require.Empty(t, bc.GetKeyPem())
	_, err = creds("nobody")
	require.Equal(t, codes.NotFound, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), `"nobody"`)
}

func parseCSR(t *testing.T, csrPEM string) *x509.CertificateRequest {
	t.Helper()
	block, _ := pem.Decode([]byte(csrPEM))
	require.NotNil(t, block)
	req, err := x509.ParseCertificateRequest(block.Bytes)
	require.NoError(t, err)
	return req
}

// requireKeyOf checks that keyPEM is the private key of csrPEM.
func requireKeyOf(t *testing.T, csrPEM string, keyPEM []byte) {
	t.Helper()
	req := parseCSR(t, csrPEM)
	kb, _ := pem.Decode(keyPEM)
	require.NotNil(t, kb, "a PEM key")
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	require.NoError(t, err)
	pub, ok := key.(interface{ Public() crypto.PublicKey })
	require.True(t, ok)
	require.True(t, pub.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(req.PublicKey), "the key of the CSR")
}

func TestRenderUsersPrivileged(t *testing.T) {
	t.Parallel()
	c, core := serve(t)
	ctx := context.Background()
	core.Add("p", "priv", kube.LevelPrivileged, "ns-2")
	_, err := c.CreateUser(ctx, &userv1.CreateUserRequest{Project: "p", LogicalCloud: "priv", User: &userv1.User{Name: "ops", Type: "token"}})
	require.NoError(t, err)
	for _, p := range []*userv1.UserPermission{
		{PermissionName: "nodes", ApiGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{PermissionName: "sys", Namespace: "kube-system", ApiGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
	} {
		_, err := c.CreateUserPermission(ctx, &userv1.CreateUserPermissionRequest{Project: "p", LogicalCloud: "priv", UserPermission: p})
		require.NoError(t, err)
	}
	r, err := c.RenderUsers(ctx, &userv1.RenderUsersRequest{Project: "p", LogicalCloud: "priv"})
	require.NoError(t, err)
	require.Equal(t, []string{
		"ServiceAccount ns-2/ops",
		"ClusterRole dcm.p.priv.nodes",
		"ClusterRoleBinding dcm.p.priv.nodes",
		"Role kube-system/dcm.p.priv.sys",
		"RoleBinding kube-system/dcm.p.priv.sys",
	}, outline(t, "p", "priv", r.GetManifests()))
	binding := decode(t, r.GetManifests()[2])
	require.Equal(t, map[string]string{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "dcm.p.priv.nodes"}, binding.RoleRef)
	require.Equal(t, []map[string]string{{"kind": "ServiceAccount", "name": "ops", "namespace": "ns-2"}}, binding.Subjects)
}

func TestRenderUsersRefused(t *testing.T) {
	t.Parallel()
	c, core := serve(t)
	ctx := context.Background()
	core.Add("p", "empty", kube.LevelStandard, "empty")
	core.Add("p", "adm", kube.LevelAdmin, "")
	render := func(lc string) error {
		_, err := c.RenderUsers(ctx, &userv1.RenderUsersRequest{Project: "p", LogicalCloud: lc})
		return err
	}
	err := render("empty")
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), `logical cloud "empty" has no user`)
	require.Equal(t, codes.FailedPrecondition, status.Code(render("adm")))
	require.Equal(t, codes.NotFound, status.Code(render("missing")))
	_, err = c.GetUserCredentials(ctx, &userv1.GetUserCredentialsRequest{Project: "p", LogicalCloud: "missing", Name: "u"})
	require.Equal(t, codes.NotFound, status.Code(err))
}

// TestPurgeNeverCallsCore: core's cascade removes a logical cloud's users
// and permissions without the user service calling core back.
func TestPurgeNeverCallsCore(t *testing.T) {
	t.Parallel()
	c, core := serve(t)
	ctx := context.Background()
	core.Add("p", "lc", kube.LevelStandard, "ns")
	_, err := c.CreateUser(ctx, &userv1.CreateUserRequest{Project: "p", LogicalCloud: "lc", User: &userv1.User{Name: "u", Type: "token"}})
	require.NoError(t, err)
	_, err = c.CreateUserPermission(ctx, &userv1.CreateUserPermissionRequest{Project: "p", LogicalCloud: "lc",
		UserPermission: &userv1.UserPermission{PermissionName: "cm", ApiGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}})
	require.NoError(t, err)
	purged, err := c.PurgeLogicalCloud(ctx, &userv1.PurgeLogicalCloudRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.EqualValues(t, 2, purged.GetRemoved())
	users, err := c.ListUsers(ctx, &userv1.ListUsersRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Empty(t, users.GetUsers())
}

// TestListLogicalCloudPermissionsNeverCallsCore: core reads a logical
// cloud's permissions to show them in its answers (GetLogicalCloud): the
// user service answers from its own records, ordered by name, without
// asking core back (which would recurse), and those of another logical
// cloud are not among them.
func TestListLogicalCloudPermissionsNeverCallsCore(t *testing.T) {
	t.Parallel()
	c, core := serve(t)
	ctx := context.Background()
	core.Add("p", "lc", kube.LevelStandard, "ns")
	core.Add("p", "lc2", kube.LevelStandard, "ns2")
	for _, n := range []string{"zz", "aa", "mm"} {
		_, err := c.CreateUserPermission(ctx, &userv1.CreateUserPermissionRequest{Project: "p", LogicalCloud: "lc",
			UserPermission: &userv1.UserPermission{PermissionName: n, ApiGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}})
		require.NoError(t, err)
	}
	_, err := c.CreateUserPermission(ctx, &userv1.CreateUserPermissionRequest{Project: "p", LogicalCloud: "lc2",
		UserPermission: &userv1.UserPermission{PermissionName: "other", ApiGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list"}}})
	require.NoError(t, err)
	resp, err := c.ListLogicalCloudPermissions(ctx, &userv1.ListLogicalCloudPermissionsRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	var names []string
	for _, p := range resp.GetUserPermissions() {
		names = append(names, p.GetPermissionName())
		require.Equal(t, []string{"configmaps"}, p.GetResources())
	}
	require.Equal(t, []string{"aa", "mm", "zz"}, names)
	none, err := c.ListLogicalCloudPermissions(ctx, &userv1.ListLogicalCloudPermissionsRequest{Project: "p", LogicalCloud: "missing"})
	require.NoError(t, err)
	require.Empty(t, none.GetUserPermissions())
}

// TestDeleteUserTakesItsPermissions: deleting a user deletes the
// permissions granted to it alone and takes its name out of those it
// shares; a permission for every user stays. None is left naming no user
// (which would grant it to every user), and a user of the same name added
// later holds none of the old user's permissions.
func TestDeleteUserTakesItsPermissions(t *testing.T) {
	t.Parallel()
	c, core := serve(t)
	ctx := context.Background()
	core.Add("p", "lc", kube.LevelStandard, "ns")
	for _, u := range []string{"alice", "bob"} {
		_, err := c.CreateUser(ctx, &userv1.CreateUserRequest{Project: "p", LogicalCloud: "lc", User: &userv1.User{Name: u, Type: "token"}})
		require.NoError(t, err)
	}
	perm := func(name string, users ...string) {
		_, err := c.CreateUserPermission(ctx, &userv1.CreateUserPermissionRequest{Project: "p", LogicalCloud: "lc",
			UserPermission: &userv1.UserPermission{PermissionName: name, ApiGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}, Users: users}})
		require.NoError(t, err)
	}
	perm("alice-only", "alice")
	perm("shared", "alice", "bob")
	perm("bob-only", "bob")
	perm("everyone")
	_, err := c.DeleteUser(ctx, &userv1.DeleteUserRequest{Project: "p", LogicalCloud: "lc", Name: "alice"})
	require.NoError(t, err)
	left, err := c.ListLogicalCloudPermissions(ctx, &userv1.ListLogicalCloudPermissionsRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	got := map[string][]string{}
	for _, p := range left.GetUserPermissions() {
		got[p.GetPermissionName()] = p.GetUsers()
	}
	require.Equal(t, map[string][]string{"bob-only": {"bob"}, "shared": {"bob"}, "everyone": nil}, got)
	_, err = c.GetUser(ctx, &userv1.GetUserRequest{Project: "p", LogicalCloud: "lc", Name: "alice"})
	require.Equal(t, codes.NotFound, status.Code(err))
	_, err = c.DeleteUser(ctx, &userv1.DeleteUserRequest{Project: "p", LogicalCloud: "lc", Name: "alice"})
	require.Equal(t, codes.NotFound, status.Code(err), "a user deleted is not found again")
}

// TestCreateUserWithItsPermissions: core's create sends a user with the
// permissions granted to it alone, in one call: they are checked against
// the facts as CreateUserPermission checks them; one the level refuses
// fails the call and leaves neither the user nor any permission; one that
// names another user is refused before anything is stored.
func TestCreateUserWithItsPermissions(t *testing.T) {
	t.Parallel()
	c, core := serve(t)
	ctx := context.Background()
	core.Add("p", "lc", kube.LevelStandard, "ns")
	perm := func(name string, users ...string) *userv1.UserPermission {
		return &userv1.UserPermission{PermissionName: name, ApiGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}, Users: users}
	}
	create := func(name string, ps ...*userv1.UserPermission) error {
		_, err := c.CreateUser(ctx, &userv1.CreateUserRequest{Project: "p", LogicalCloud: "lc", User: &userv1.User{Name: name, Type: "token"}, UserPermissions: ps})
		return err
	}
	require.NoError(t, create("u", perm("pods", "u"), perm("more", "u")))
	got, err := c.ListUserPermissions(ctx, &userv1.ListUserPermissionsRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Len(t, got.GetUserPermissions(), 2)
	require.Equal(t, "ns", got.GetUserPermissions()[0].GetNamespace(), "the namespace resolved from the facts")

	err = create("v", perm("ok", "v"), &userv1.UserPermission{PermissionName: "nodes", ApiGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}, Users: []string{"v"}})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "a standard logical cloud grants no cluster-wide resource: %v", err)
	_, err = c.GetUser(ctx, &userv1.GetUserRequest{Project: "p", LogicalCloud: "lc", Name: "v"})
	require.Equal(t, codes.NotFound, status.Code(err), "the user is not kept")
	_, err = c.GetUserPermission(ctx, &userv1.GetUserPermissionRequest{Project: "p", LogicalCloud: "lc", Name: "ok"})
	require.Equal(t, codes.NotFound, status.Code(err), "nor its first permission")

	err = create("w", perm("shared", "w", "u"))
	require.Equal(t, "user_permissions[0].users", errs.FieldOf(status.Convert(err)), "%v", err)
	_, err = c.GetUser(ctx, &userv1.GetUserRequest{Project: "p", LogicalCloud: "lc", Name: "w"})
	require.Equal(t, codes.NotFound, status.Code(err))
}
