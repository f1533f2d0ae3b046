package dns

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// The ServiceAccount the controller reads DNSEndpoints as, on each cluster
// a run publishes from. The traffic rollout must apply it (rsync issues
// tokens only for ServiceAccounts DCM applied) with a ClusterRole that may
// get, list and watch dnsendpoints.externaldns.k8s.io and update their
// status (external-dns's CRD source records the generation it saw).
const (
	ReaderNamespace      = "dcm-traffic"
	ReaderServiceAccount = "dcm-dns-reader"
)

// tokenLifetime is what the controller asks rsync for; a token is reused
// until tokenRenew before it expires, so passes do not each mint one.
const (
	tokenLifetime = time.Hour
	tokenRenew    = 10 * time.Minute
)

// RsyncConnector reaches clusters the way the resource synchronizer knows
// them: the API server's address and CA from GetClusterConnection, and a
// bearer token of the reader ServiceAccount from GetServiceAccountToken
// (never the cluster's admin credentials).
func RsyncConnector(c rsyncv1.RsyncInternalServiceClient) Connector {
	type cached struct {
		token  string
		expire time.Time
	}
	var mu sync.Mutex
	tokens := map[string]cached{}
	return func(ctx context.Context, provider, cluster string) (*rest.Config, error) {
		conn, err := c.GetClusterConnection(ctx, &rsyncv1.GetClusterConnectionRequest{Provider: provider, Cluster: cluster})
		if err != nil {
			return nil, err
		}
		key := provider + "/" + cluster
		mu.Lock()
		tok, ok := tokens[key]
		mu.Unlock()
		if !ok || time.Until(tok.expire) < tokenRenew {
			resp, err := c.GetServiceAccountToken(ctx, &rsyncv1.GetServiceAccountTokenRequest{
				Provider: provider, Cluster: cluster, Namespace: ReaderNamespace,
				ServiceAccount: ReaderServiceAccount, ExpirationSeconds: int64(tokenLifetime / time.Second)})
			if err != nil {
				return nil, err
			}
			tok = cached{token: string(resp.GetToken()), expire: resp.GetExpireTime().AsTime()}
			mu.Lock()
			tokens[key] = tok
			mu.Unlock()
		}
		return &rest.Config{
			Host:        conn.GetServer(),
			BearerToken: tok.token,
			TLSClientConfig: rest.TLSClientConfig{
				CAData:     conn.GetCertificateAuthorityData(),
				ServerName: conn.GetTlsServerName(),
			},
		}, nil
	}
}
