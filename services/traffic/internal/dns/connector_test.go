package dns

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// fakeRsync answers the two calls RsyncConnector makes; any other call
// panics through the nil embedded interface, which the test would show.
type fakeRsync struct {
	rsyncv1.RsyncInternalServiceClient
	tokens   []*rsyncv1.GetServiceAccountTokenRequest
	lifetime time.Duration
}

func (f *fakeRsync) GetClusterConnection(_ context.Context, in *rsyncv1.GetClusterConnectionRequest, _ ...grpc.CallOption) (*rsyncv1.GetClusterConnectionResponse, error) {
	return &rsyncv1.GetClusterConnectionResponse{Server: "https://" + in.GetCluster() + ".invalid:6443",
		CertificateAuthorityData: []byte("CA of " + in.GetCluster()), TlsServerName: "api." + in.GetCluster()}, nil
}

func (f *fakeRsync) GetServiceAccountToken(_ context.Context, in *rsyncv1.GetServiceAccountTokenRequest, _ ...grpc.CallOption) (*rsyncv1.GetServiceAccountTokenResponse, error) {
	f.tokens = append(f.tokens, in)
	return &rsyncv1.GetServiceAccountTokenResponse{Token: []byte("token-" + in.GetCluster()),
		ExpireTime: timestamppb.New(time.Now().Add(f.lifetime))}, nil
}

// reader is cluster c of provider edge, read as group g1's DNS reader.
func reader(c string) Cluster {
	return Cluster{Provider: "edge", Cluster: c, Namespace: "lc1-ns", ServiceAccount: "g1-dns-reader"}
}

func TestRsyncConnector(t *testing.T) {
	f := &fakeRsync{lifetime: time.Hour}
	connect := RsyncConnector(f)
	ctx := context.Background()
	rc, err := connect(ctx, reader("c1"))
	require.NoError(t, err)
	require.Equal(t, "https://c1.invalid:6443", rc.Host)
	require.Equal(t, "token-c1", rc.BearerToken)
	require.Equal(t, []byte("CA of c1"), rc.CAData)
	require.Equal(t, "api.c1", rc.ServerName)
	require.Len(t, f.tokens, 1)
	require.Equal(t, "lc1-ns", f.tokens[0].GetNamespace())
	require.Equal(t, "g1-dns-reader", f.tokens[0].GetServiceAccount())
	require.Equal(t, int64(3600), f.tokens[0].GetExpirationSeconds())

	_, err = connect(ctx, reader("c1"))
	require.NoError(t, err)
	require.Len(t, f.tokens, 1, "a token with life left is reused")
	_, err = connect(ctx, reader("c2"))
	require.NoError(t, err)
	require.Len(t, f.tokens, 2, "one token per cluster")

	f.lifetime = 5 * time.Minute // below the renewal margin
	g := RsyncConnector(f)
	_, err = g(ctx, reader("c3"))
	require.NoError(t, err)
	_, err = g(ctx, reader("c3"))
	require.NoError(t, err)
	require.Len(t, f.tokens, 4, "a token about to expire is renewed")
}
