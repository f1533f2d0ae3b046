package rsync

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// healthView reads the clusters' health records (engine/health.go) for
// the registry's answers and the rollouts' statuses.
type healthView struct {
	records *store.Records[*rsyncv1.StoredClusterHealth]
	// cfg is the probes' configuration (zero: probing is off and every
	// cluster shows Unknown).
	cfg engine.HealthConfig
	// downs are the clusters last read down (Unreachable or
	// Unauthorized), by "provider/cluster", read at downAt (downNow).
	mu     sync.Mutex
	downs  map[string]string
	downAt time.Time
}

// downNow is the clusters that are down, as read from the store at most
// an interval (at most 5 s) ago: a rollout status is read often, and the
// records of every cluster are read at once (one command), not per
// status.
func (hv *healthView) downNow(ctx context.Context) (map[string]string, error) {
	if hv.cfg.Interval <= 0 {
		return nil, nil // nothing probed: nothing known down
	}
	hv.mu.Lock()
	defer hv.mu.Unlock()
	if hv.downs != nil && time.Since(hv.downAt) < min(hv.cfg.Interval, 5*time.Second) {
		return hv.downs, nil
	}
	items, err := hv.records.All(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	downs := map[string]string{}
	for _, it := range items {
		switch st := hv.cfg.Shown(it.Msg, now).GetState(); st {
		case engine.HealthUnreachable, engine.HealthUnauthorized:
			downs[it.ID] = st
		}
	}
	hv.downs, hv.downAt = downs, now
	return downs, nil
}

// ProbeClusters sets up the cluster health probes (docs/fleet.md
// "Cluster health"); Run runs them. An interval of 0 leaves them off.
// Call it before Run.
func (s *Service) ProbeClusters(cfg engine.HealthConfig, log *zap.Logger) *engine.Health {
	s.registry.health.cfg = cfg
	s.prober = engine.NewHealth(s.registry.health.records, s.engine, s.connector, func(ctx context.Context) ([]string, error) {
		now, err := s.registryNow(ctx)
		return slices.Collect(maps.Keys(now)), err
	}, cfg, log)
	return s.prober
}

// one is the shown health of a cluster.
func (hv *healthView) one(ctx context.Context, provider, cluster string) (*rsyncv1.StoredClusterHealth, error) {
	rec, err := hv.records.Get(ctx, store.Key(provider, cluster))
	switch {
	case err == nil:
		return hv.cfg.Shown(rec.Msg, time.Now()), nil
	case errs.Code(err) == codes.NotFound:
		return hv.cfg.Shown(nil, time.Now()), nil
	default:
		return nil, err
	}
}

// under is the shown health of the clusters of providers, by
// "provider/cluster" (a cluster never probed is not there: Unknown).
func (hv *healthView) under(ctx context.Context, providers []string) (map[string]*rsyncv1.StoredClusterHealth, error) {
	out := map[string]*rsyncv1.StoredClusterHealth{}
	for chunk := range slices.Chunk(providers, store.MaxPageSize) {
		recs, err := hv.records.ListUnder(ctx, chunk)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		for p, rs := range recs {
			for _, r := range rs {
				out[store.Key(p, r.GetCluster())] = hv.cfg.Shown(r, now)
			}
		}
	}
	return out, nil
}

// stateOf is the state of key in m (Unknown when absent).
func stateOf(m map[string]*rsyncv1.StoredClusterHealth, key string) string {
	if h := m[key]; h != nil {
		return h.GetState()
	}
	return engine.HealthUnknown
}

// withHealth puts h into c's status: all of it for admins and DCM's
// services, the state and its times for a tenant (the error and version
// may name the API server's address, which tenants are not shown).
func withHealth(ctx context.Context, c *rsyncv1.Cluster, h *rsyncv1.StoredClusterHealth) *rsyncv1.Cluster {
	if c.Status == nil {
		c.Status = &rsyncv1.ClusterStatus{}
	}
	st := c.Status
	st.State, st.Since, st.LastSeen = h.GetState(), h.GetSince(), h.GetLastSeen()
	if r := server.Caller(ctx).Role; r == pki.RoleAdmin || r == pki.RoleService {
		st.LastError, st.ServerVersion = h.GetLastError(), h.GetServerVersion()
	}
	return c
}

// checkState refuses a list filter that is not a health state.
func checkState(state string) error {
	if state == "" || slices.Contains(engine.HealthStates, state) {
		return nil
	}
	return errs.Invalid("state", "must be one of %s, got %q", strings.Join(engine.HealthStates, ", "), state)
}

// withHealthNamed sets the health of the clusters of a rollout status
// that are not done and are down (Unreachable or Unauthorized), so that a
// status names them as such rather than only as retrying. A status read
// fails only with the rollout's own errors: health that cannot be read is
// left out.
func (hv *healthView) withHealthNamed(ctx context.Context, st *rsyncv1.RolloutStatus) {
	open := func(c *rsyncv1.RolloutClusterStatus) bool {
		switch c.GetState() {
		case rsyncv1.State_STATE_PENDING, rsyncv1.State_STATE_RETRYING, rsyncv1.State_STATE_FAILED:
			return true
		}
		return false
	}
	if !slices.ContainsFunc(st.GetClusters(), open) {
		return
	}
	downs, err := hv.downNow(ctx)
	if err != nil {
		return
	}
	for _, c := range st.GetClusters() {
		if open(c) {
			c.Health = downs[store.Key(c.GetProvider(), c.GetCluster())]
		}
	}
}
