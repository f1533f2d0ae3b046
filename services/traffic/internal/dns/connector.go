package dns

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// tokenLifetime is what the controller asks rsync for; a token is reused
// until tokenRenew before it expires, so passes do not each mint one.
const (
	tokenLifetime = time.Hour
	tokenRenew    = 10 * time.Minute
)

// RsyncConnector reaches clusters the way the resource synchronizer knows
// them: the API server's address and CA from GetClusterConnection, and a
// bearer token of the run's reader ServiceAccount from
// GetServiceAccountToken (never the cluster's admin credentials; rsync
// gives the traffic program tokens of its own rollouts' ServiceAccounts
// only).
func RsyncConnector(c rsyncv1.RsyncInternalServiceClient) Connector {
	type cached struct {
		token  string
		expire time.Time
	}
	var mu sync.Mutex
	tokens := map[Cluster]cached{}
	return func(ctx context.Context, cl Cluster) (*rest.Config, error) {
		conn, err := c.GetClusterConnection(ctx, &rsyncv1.GetClusterConnectionRequest{Provider: cl.Provider, Cluster: cl.Cluster})
		if err != nil {
			return nil, err
		}
		mu.Lock()
		tok, ok := tokens[cl]
		mu.Unlock()
		if !ok || time.Until(tok.expire) < tokenRenew {
			resp, err := c.GetServiceAccountToken(ctx, &rsyncv1.GetServiceAccountTokenRequest{
				Provider: cl.Provider, Cluster: cl.Cluster, Namespace: cl.Namespace,
				ServiceAccount: cl.ServiceAccount, ExpirationSeconds: int64(tokenLifetime / time.Second)})
			if err != nil {
				return nil, err
			}
			tok = cached{token: string(resp.GetToken()), expire: resp.GetExpireTime().AsTime()}
			mu.Lock()
			tokens[cl] = tok
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
