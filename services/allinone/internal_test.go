package allinone_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// internalServices are the contracts between DCM's own services
// (proto/dcm/<svc>/v1/internal.proto).
var internalServices = []string{
	"dcm.namespace.v1.NamespaceInternalService",
	"dcm.quota.v1.QuotaInternalService",
	"dcm.rsync.v1.RsyncInternalService",
	"dcm.user.v1.UserInternalService",
}

// serviceCreds dials as the programs do, with their own certificate
// (role service).
func serviceCreds(t *testing.T, s *stacktest.Stack) grpc.DialOption {
	t.Helper()
	dir := filepath.Join(s.DataDir, "pki")
	m, err := pki.Load(pki.Files{CA: filepath.Join(dir, pki.CACertFile), Cert: filepath.Join(dir, pki.ServerCertFile), Key: filepath.Join(dir, pki.ServerKeyFile)})
	require.NoError(t, err)
	return grpc.WithTransportCredentials(credentials.NewTLS(m.Client()))
}

// TestInternalServicesOnTheWholeProgram: the internal services are served
// (reflection lists them) to the programs' own certificate only; the
// admin certificate, admitted on every public service, is refused on them.
func TestInternalServicesOnTheWholeProgram(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	names := listServices(t, s.GRPC, adminCreds(t, s))
	for _, want := range internalServices {
		require.Contains(t, names, want, "reflection stays on")
	}
	ctx := context.Background()
	dial := func(creds grpc.DialOption) *grpc.ClientConn {
		conn, err := grpc.NewClient(s.GRPC, creds)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}
	admin, svc := dial(adminCreds(t, s)), dial(serviceCreds(t, s))

	_, err := corev1.NewCoreServiceClient(admin).ListProjects(ctx, &corev1.ListProjectsRequest{})
	require.NoError(t, err, "an admin calls the public services")
	_, err = rsyncv1.NewRsyncServiceClient(admin).ListClusterProviders(ctx, &rsyncv1.ListClusterProvidersRequest{})
	require.NoError(t, err)

	_, err = userv1.NewUserInternalServiceClient(admin).GetUserCredentials(ctx, &userv1.GetUserCredentialsRequest{Project: "p", LogicalCloud: "lc", Name: "u"})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "a private key is never an admin's to read: %v", err)
	_, err = rsyncv1.NewRsyncInternalServiceClient(admin).SelectClusters(ctx, &rsyncv1.SelectClustersRequest{Labels: []string{"edge"}})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	_, err = rsyncv1.NewRsyncInternalServiceClient(svc).SelectClusters(ctx, &rsyncv1.SelectClustersRequest{Labels: []string{"edge"}})
	require.NoError(t, err, "the programs call each other's internal services")
}

// TestReferencesHeldAfterRestart: a cluster reference whose hold rsync
// does not have (stored before rsync kept holds) is held again when core
// starts, so the referenced cluster cannot be deleted.
func TestReferencesHeldAfterRestart(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := newREST(t, s)
	kc, _ := kubeconfig(t, s.CA, "https://127.0.0.1:1") // never dialed
	body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": "c1"}, "spec": map[string]string{"kubeconfig": kc}})
	require.NoError(t, err)
	r.want(201, "POST", "/v2/cluster-providers", `{"metadata":{"name":"edge"}}`)
	r.want(201, "POST", "/v2/cluster-providers/edge/clusters", string(body))
	r.want(201, "POST", "/v2/projects", `{"metadata":{"name":"p"}}`)
	r.want(201, "POST", "/v2/projects/p/logical-clouds", `{"metadata":{"name":"lc"}}`)
	r.want(201, "POST", "/v2/projects/p/logical-clouds/lc/cluster-references", `{"cluster-provider":"edge","cluster-name":"c1"}`)

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
	r = newREST(t, s)
	eventually(t, "core holds the referenced clusters again", func() bool {
		return strings.Contains(logs.String(), "referenced clusters held in rsync")
	})
	require.Contains(t, logs.String(), `"references":1`)
	require.Contains(t, r.want(409, "DELETE", "/v2/cluster-providers/edge/clusters/c1", ""), `"reason":"REFERENCED"`)
}
