package rsync

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// connector gives the engine clients of registered clusters, cached per
// cluster while its kubeconfig stays the same.
type connector struct {
	clusters *store.Records[*rsyncv1.Cluster]
	mu       sync.Mutex
	cache    map[string]cachedClient
}

type cachedClient struct {
	fingerprint string
	client      *engine.Kube
}

// Known implements engine.Connector.
func (c *connector) Known(ctx context.Context, provider, cluster string) error {
	_, err := c.clusters.Get(ctx, store.Key(provider, cluster))
	return err
}

// Connect implements engine.Connector. A cluster no longer registered is
// a terminal error; a store that is down is retryable.
func (c *connector) Connect(ctx context.Context, provider, cluster string) (engine.Cluster, error) {
	k, err := c.kube(ctx, provider, cluster)
	if err != nil {
		return nil, err // not a nil *Kube in a non-nil interface
	}
	return k, nil
}

// kube is Connect's client of a registered cluster.
func (c *connector) kube(ctx context.Context, provider, cluster string) (*engine.Kube, error) {
	id := store.Key(provider, cluster)
	rec, err := c.clusters.Get(ctx, id)
	if errs.Code(err) == codes.NotFound {
		return nil, engine.Terminal(fmt.Errorf("cluster %s: %w", id, engine.ErrUnregistered))
	}
	if err != nil {
		return nil, err
	}
	fp := rec.Msg.GetStatus().GetKubeconfigFingerprint()
	c.mu.Lock()
	cached, ok := c.cache[id]
	c.mu.Unlock()
	if ok && cached.fingerprint == fp {
		return cached.client, nil
	}
	kc, err := c.clusters.Secret(ctx, id, kubeconfigSecret)
	if err != nil {
		return nil, err
	}
	cl, err := engine.NewKube(kc)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.cache[id] = cachedClient{fingerprint: fp, client: cl}
	c.mu.Unlock()
	return cl, nil
}
