package allinone_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// internalServices are the contracts between DCM's own services
// (proto/dcm/<svc>/v1/internal.proto).
var internalServices = []string{
	"dcm.facts.v1.LogicalCloudFactsInternalService",
	"dcm.namespace.v1.NamespaceInternalService",
	"dcm.quota.v1.QuotaInternalService",
	"dcm.rsync.v1.RsyncInternalService",
	"dcm.user.v1.UserInternalService",
}

// serviceCreds dials as the program does, with its own certificate
// (CN dcm, role service: every program's rights).
func serviceCreds(t *testing.T, s *stacktest.Stack) grpc.DialOption {
	t.Helper()
	m, err := pki.Load(pki.LocalFiles(filepath.Join(s.DataDir, "pki")))
	require.NoError(t, err)
	return grpc.WithTransportCredentials(credentials.NewTLS(m.Client()))
}

// certCreds dials with a client certificate of the stack's CA.
func certCreds(t *testing.T, s *stacktest.Stack, cert tls.Certificate) grpc.DialOption {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(s.CA.Cert)
	return grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, Certificates: []tls.Certificate{cert}}))
}

// TestInternalServicesOnTheWholeProgram: every method the program serves
// (reflection lists every service) has callers declared in its contract
// (fail closed otherwise), and they hold on the whole program: only core
// reaches users' credentials and rollouts; the gateway's identity reaches
// neither, nor does an admin, who keeps the public services and the
// rollout status reads; the gateway's HTTPS certificate is no client
// certificate at all.
func TestInternalServicesOnTheWholeProgram(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	names := listServices(t, s.GRPC, adminCreds(t, s))
	for _, want := range internalServices {
		require.Contains(t, names, want, "reflection stays on")
	}
	for _, name := range names {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		require.NoError(t, err, name)
		methods := d.(protoreflect.ServiceDescriptor).Methods()
		for i := range methods.Len() {
			full := "/" + name + "/" + string(methods.Get(i).Name())
			_, declared := server.CallersOf(full)
			require.True(t, declared || server.IsOpen(full), "%s declares no callers (dcm.access.v1): it is refused to everyone", full)
		}
	}

	ctx := context.Background()
	dial := func(creds grpc.DialOption) *grpc.ClientConn {
		conn, err := grpc.NewClient(s.GRPC, creds)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	year := time.Now().Add(365 * 24 * time.Hour)
	admin, all := dial(adminCreds(t, s)), dial(serviceCreds(t, s))
	core := dial(certCreds(t, s, s.Issue(t, pki.Identity{Subject: "core", Role: pki.RoleService}, year)))
	gateway := dial(certCreds(t, s, s.Issue(t, pki.Identity{Subject: "gateway", Role: pki.RoleService}, year)))
	dir := filepath.Join(s.DataDir, "pki")
	https, err := tls.LoadX509KeyPair(filepath.Join(dir, pki.HTTPSCertFile), filepath.Join(dir, pki.HTTPSKeyFile))
	require.NoError(t, err)
	httpsConn := dial(certCreds(t, s, https))

	_, err = corev1.NewCoreServiceClient(admin).ListProjects(ctx, &corev1.ListProjectsRequest{})
	require.NoError(t, err, "an admin calls the public services")
	_, err = rsyncv1.NewRsyncServiceClient(admin).ListClusterProviders(ctx, &rsyncv1.ListClusterProvidersRequest{})
	require.NoError(t, err)
	_, err = corev1.NewCoreServiceClient(gateway).ListProjects(ctx, &corev1.ListProjectsRequest{})
	require.NoError(t, err, "the gateway calls the public services")
	_, err = corev1.NewCoreServiceClient(core).ListProjects(ctx, &corev1.ListProjectsRequest{})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "core has no business with projects: %v", err)
	_, err = rsyncv1.NewRsyncInternalServiceClient(admin).GetRolloutStatus(ctx, &rsyncv1.GetRolloutStatusRequest{Owner: "lc/p/lc"})
	require.NotEqual(t, codes.PermissionDenied, status.Code(err), "an admin reads rollout status: %v", err)

	creds := func(c *grpc.ClientConn) error {
		_, err := userv1.NewUserInternalServiceClient(c).GetUserCredentials(ctx, &userv1.GetUserCredentialsRequest{Project: "p", LogicalCloud: "lc", Name: "u"})
		return err
	}
	rollout := func(c *grpc.ClientConn) error {
		_, err := rsyncv1.NewRsyncInternalServiceClient(c).SubmitRollout(ctx, &rsyncv1.SubmitRolloutRequest{})
		return err
	}
	for _, call := range []struct {
		name string
		f    func(*grpc.ClientConn) error
	}{{"GetUserCredentials", creds}, {"SubmitRollout", rollout}} {
		err := call.f(gateway)
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%s is not the gateway's: %v", call.name, err)
		err = call.f(admin)
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%s is never an admin's: %v", call.name, err)
		err = call.f(httpsConn)
		require.Equal(t, codes.Unavailable, status.Code(err), "the HTTPS certificate is refused in the handshake: %v", err)
		err = call.f(core)
		require.NotEqual(t, codes.PermissionDenied, status.Code(err), "%s is core's: %v", call.name, err)
		require.NotEqual(t, codes.Unavailable, status.Code(err), "%v", err)
		err = call.f(all)
		require.NotEqual(t, codes.PermissionDenied, status.Code(err), "the all-in-one program has every program's rights: %v", err)
	}
	_, err = rsyncv1.NewRsyncInternalServiceClient(admin).SelectClusters(ctx, &rsyncv1.SelectClustersRequest{Labels: []string{"edge"}})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	_, err = rsyncv1.NewRsyncInternalServiceClient(core).SelectClusters(ctx, &rsyncv1.SelectClustersRequest{Labels: []string{"edge"}})
	require.NoError(t, err, "core calls the internal services")
}

// TestReferencesHeldAfterRestart: a cluster reference whose hold rsync
// does not have (stored before rsync kept holds) is held again when core
// starts, so the referenced cluster cannot be deleted.
func TestReferencesHeldAfterRestart(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	kc, _ := kubeconfig(t, s.CA, "https://127.0.0.1:1") // never dialed
	body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": "c1"}, "spec": map[string]string{"kubeconfig": kc}})
	require.NoError(t, err)
	r.Want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
	r.Want(201, "POST", "/v2/cluster-providers/edge/clusters", string(body))
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p"}}`)
	r.Want(201, "POST", "/v2/projects/p/logical-clouds", `{"metadata":{"name":"lc"}}`)
	r.Want(201, "POST", "/v2/projects/p/logical-clouds/lc/cluster-references", `{"cluster-provider":"edge","cluster-name":"c1"}`)

	// Forget the hold, as a store from before holds would not have it.
	conn, err := grpc.NewClient(s.GRPC, serviceCreds(t, s))
	require.NoError(t, err)
	rel, err := rsyncv1.NewRsyncInternalServiceClient(conn).ReleaseClusters(context.Background(), &rsyncv1.ReleaseClustersRequest{Owner: "lc/p/lc"})
	require.NoError(t, err)
	require.EqualValues(t, 1, rel.GetRemoved())
	require.NoError(t, conn.Close())
	s.Stop()

	logs := &syncBuffer{}
	s = stacktest.StartWith(t, stacktest.Options{DataDir: s.DataDir, Logs: logs, Args: []string{"-log-level", "info"}})
	r = apitest.NewREST(t, s)
	apitest.Eventually(t, "core holds the referenced clusters again", func() bool {
		return strings.Contains(logs.String(), "referenced clusters held in rsync")
	})
	require.Contains(t, logs.String(), `"references":1`)
	require.Contains(t, r.Want(409, "DELETE", "/v2/cluster-providers/edge/clusters/c1", ""), `"reason":"REFERENCED"`)
}
