package allinone_test

import (
	"context"
	"path/filepath"
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
