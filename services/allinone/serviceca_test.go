package allinone_test

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// TestServiceCAPinned: with configured files whose CA bundle holds a
// second CA (one that issues operators' certificates, say), that CA's
// admins are admitted but a certificate of it claiming the role service
// is not, on REST (401) nor on gRPC (PermissionDenied): programs come
// from the CA that issued the program's own certificate.
func TestServiceCAPinned(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts the whole program")
	}
	data := t.TempDir()
	dir := filepath.Join(data, "pki")
	local, operators, bundle := servertest.TwoCAs(t, dir)
	f := pki.LocalFiles(dir)
	s := stacktest.StartWith(t, stacktest.Options{DataDir: data, Args: []string{
		"-tls-ca-file", bundle, "-tls-cert-file", f.Cert, "-tls-key-file", f.Key,
		"-http-tls-cert-file", f.HTTPCert, "-http-tls-key-file", f.HTTPKey,
	}})

	year := time.Now().Add(365 * 24 * time.Hour)
	cert := func(ca *pki.CA, id pki.Identity) (grpc.DialOption, int) {
		c, k, err := ca.Issue(pki.Request{Identity: id, Client: true, NotAfter: year})
		require.NoError(t, err)
		pair, err := tls.X509KeyPair(c, k)
		require.NoError(t, err)
		code, _ := apitest.Call(t, s.Client(&pair), "GET", s.URL+"/v2/cluster-providers", "")
		return certCreds(t, s, pair), code
	}
	foreignCore, rest := cert(operators, pki.Identity{Subject: "core", Role: pki.RoleService})
	require.Equal(t, 401, rest, "a service identity of the operators' CA on REST")
	_, rest = cert(operators, pki.Identity{Subject: "ops", Role: pki.RoleAdmin})
	require.Equal(t, 200, rest, "an admin of the operators' CA")
	core, rest := cert(local, pki.Identity{Subject: "core", Role: pki.RoleService})
	require.NotEqual(t, 401, rest, "a service identity of the service CA is authenticated (what it may do on REST is the gateway's Authorize)")

	selectClusters := func(creds grpc.DialOption) codes.Code {
		conn, err := grpc.NewClient(s.GRPC, creds)
		require.NoError(t, err)
		defer func() { _ = conn.Close() }()
		_, err = rsyncv1.NewRsyncInternalServiceClient(conn).SelectClusters(context.Background(), &rsyncv1.SelectClustersRequest{Labels: []string{"edge"}})
		return status.Code(err)
	}
	require.Equal(t, codes.PermissionDenied, selectClusters(foreignCore), "a service identity of the operators' CA on gRPC")
	require.Equal(t, codes.OK, selectClusters(core))
}
