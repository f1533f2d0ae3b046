package dns

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/client-go/rest"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Connector answers how to reach a cluster's API server as a reader of its
// DNSEndpoints (in production, RsyncConnector).
type Connector func(ctx context.Context, c Cluster) (*rest.Config, error)

// Controller keeps every stored run's records in its DNS provider. Each
// traffic replica runs one; a group's runs are passed by the replica that
// holds the group's lease (lease.go).
type Controller struct {
	runs    *store.Records[*structpb.Struct]
	leases  *store.Leases
	connect Connector
	log     *zap.Logger
	every   time.Duration
	// PassTimeout bounds one run's pass (reaching its clusters, reading
	// the zone, applying the plan); a cluster that does not answer in
	// time fails the pass.
	PassTimeout time.Duration
	// Holder names this replica in the groups' leases (New makes one).
	Holder string
	// LeaseTTL is how long a group's lease outlives a replica that died
	// passing over it; it is renewed every third of it during a pass.
	LeaseTTL time.Duration

	// mu orders Set and Release with a pass's final write, so a run Set
	// again while its release pass ran is not deleted under it.
	mu sync.Mutex
}

// New is the controller over st's dns_runs collection; Run passes every
// interval.
func New(st *store.Store, connect Connector, log *zap.Logger, interval time.Duration) *Controller {
	return &Controller{
		runs:        store.NewRecords(st, "dns_runs", "dns run", func() *structpb.Struct { return &structpb.Struct{} }),
		leases:      store.NewLeases(st, LeaseCollection),
		Holder:      replicaName(),
		LeaseTTL:    30 * time.Second,
		connect:     connect,
		log:         log,
		every:       interval,
		PassTimeout: time.Minute,
	}
}

// Set makes the group's runs exactly runs: new ones are stored, listed
// ones updated (their credentials replaced), and the group's runs no
// longer listed become releasing. Nothing is written unless every run is
// valid.
func (c *Controller) Set(ctx context.Context, group string, runs []Run) error {
	if group == "" {
		return errs.Invalid("group", "is required")
	}
	seen := map[string]bool{}
	for i, r := range runs {
		if r.Group != "" && r.Group != group {
			return errs.Invalid(fmt.Sprintf("runs[%d].group", i), "is %q, not the group %q", r.Group, group)
		}
		if err := validate(i, r); err != nil {
			return err
		}
		k := store.Key(group, r.Intent, r.ID)
		if seen[k] {
			return errs.Invalid(fmt.Sprintf("runs[%d].id", i), "intent %q has id %q twice", r.Intent, r.ID)
		}
		seen[k] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, err := c.runs.Children(ctx, group)
	if err != nil {
		return err
	}
	byKey := map[string]store.Item[*structpb.Struct]{}
	for _, it := range cur {
		byKey[it.ID] = it
	}
	for _, r := range runs {
		s := &stored{Group: group, Intent: r.Intent, ID: r.ID, ExternalName: r.ExternalName, Provider: r.Provider,
			Params: toPairs(r.Params), Clusters: slices.Clone(r.Clusters), Selector: toPairs(r.Selector), State: stateActive}
		for _, p := range toPairs(r.Credentials) {
			s.CredentialKeys = append(s.CredentialKeys, p.Key)
		}
		creds, err := json.Marshal(r.Credentials)
		if err != nil {
			return errs.Internal(err, "encode credentials")
		}
		secret := store.Secret{Name: credentialsSecret, Value: creds}
		if it, ok := byKey[s.key()]; ok {
			old, err := fromStruct(it.Msg)
			if err != nil {
				return err
			}
			s.LastSync, s.LastError, s.Records = old.LastSync, old.LastError, old.Records
			body, err := s.toStruct()
			if err != nil {
				return err
			}
			if err := c.runs.Update(ctx, it.ID, it.Version, body, secret); err != nil {
				return err
			}
			continue
		}
		body, err := s.toStruct()
		if err != nil {
			return err
		}
		if err := c.runs.Create(ctx, s.key(), group, body, secret); err != nil {
			return err
		}
	}
	return c.release(ctx, cur, func(id string) bool { return !seen[id] })
}

// Release makes every run of the group releasing: the next pass deletes
// the records each owns, then the run.
func (c *Controller) Release(ctx context.Context, group string) error {
	if group == "" {
		return errs.Invalid("group", "is required")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, err := c.runs.Children(ctx, group)
	if err != nil {
		return err
	}
	return c.release(ctx, cur, func(string) bool { return true })
}

func (c *Controller) release(ctx context.Context, cur []store.Item[*structpb.Struct], which func(id string) bool) error {
	for _, it := range cur {
		if !which(it.ID) {
			continue
		}
		s, err := fromStruct(it.Msg)
		if err != nil {
			return err
		}
		if s.State == stateReleasing {
			continue
		}
		s.State = stateReleasing
		body, err := s.toStruct()
		if err != nil {
			return err
		}
		if err := c.runs.Update(ctx, it.ID, it.Version, body); err != nil {
			return err
		}
	}
	return nil
}

// Status lists the group's runs, ordered by intent and id.
func (c *Controller) Status(ctx context.Context, group string) ([]*trafficv1.DnsRunStatus, error) {
	cur, err := c.runs.Children(ctx, group)
	if err != nil {
		return nil, err
	}
	out := make([]*trafficv1.DnsRunStatus, 0, len(cur))
	for _, it := range cur {
		s, err := fromStruct(it.Msg)
		if err != nil {
			return nil, err
		}
		out = append(out, s.status())
	}
	slices.SortFunc(out, func(a, b *trafficv1.DnsRunStatus) int {
		if a.GetIntent() != b.GetIntent() {
			return strings.Compare(a.GetIntent(), b.GetIntent())
		}
		return strings.Compare(a.GetId(), b.GetId())
	})
	return out, nil
}

// Run passes over every run each interval until ctx is done. A failing
// pass is recorded in its run's status and logged; it never stops the loop.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		if err := c.SyncOnce(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("dns pass", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SyncOnce makes one pass over every run of the groups whose lease it
// can hold: an active run's records follow its clusters' DNSEndpoints; a
// releasing run's records are deleted, then the run. A run's failure goes
// to its status; SyncOnce fails only when the runs cannot be read, a
// lease cannot be asked for or a status cannot be written.
func (c *Controller) SyncOnce(ctx context.Context) error {
	all, err := c.runs.Match(ctx, nil)
	if err != nil {
		return err
	}
	order, groups, err := byGroup(all)
	if err != nil {
		return err
	}
	var firstErr error
	for _, g := range order {
		if err := c.syncGroup(ctx, g, groups[g]); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

func (c *Controller) syncRun(ctx context.Context, it store.Item[*structpb.Struct]) error {
	s, err := fromStruct(it.Msg)
	if err != nil {
		return err
	}
	raw, err := c.runs.Secret(ctx, it.ID, credentialsSecret)
	if err != nil {
		return err
	}
	creds := map[string]string{}
	if err := json.Unmarshal(raw, &creds); err != nil {
		return errs.Internal(fmt.Errorf("decode credentials of dns run %q: %w", it.ID, err), "store error")
	}
	records, passErr := c.safePass(ctx, s, creds)
	if passErr != nil {
		c.log.Warn("dns run pass failed", zap.String("run", it.ID), zap.String("state", s.State), zap.Error(passErr))
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if passErr == nil && s.State == stateReleasing {
		// Delete only the run the pass released: a Set since then made it
		// active again (a new version), and its records are wanted.
		cur, err := c.runs.Get(ctx, it.ID)
		if errs.Code(err) == codes.NotFound {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.Version == it.Version {
			if err := c.runs.Delete(ctx, it.ID); err != nil && errs.Code(err) != codes.NotFound {
				return err
			}
			c.log.Info("dns run released", zap.String("run", it.ID))
			return nil
		}
	}
	_, err = c.runs.Modify(ctx, it.ID, func(m *structpb.Struct) error {
		cur, err := fromStruct(m)
		if err != nil {
			return err
		}
		if passErr != nil {
			cur.LastError = passErr.Error()
		} else {
			cur.LastError, cur.LastSync, cur.Records = "", time.Now().UTC().Format(time.RFC3339Nano), records
		}
		body, err := cur.toStruct()
		if err != nil {
			return err
		}
		m.Fields = body.Fields
		return nil
	})
	if errs.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// safePass runs one pass within PassTimeout. A panic in it (external-dns
// decoding what a cluster or a DNS server sent) fails that run's pass
// only, not the loop.
func (c *Controller) safePass(ctx context.Context, s *stored, creds map[string]string) (records []string, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.PassTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			records, err = nil, fmt.Errorf("pass panicked: %v", p)
		}
	}()
	return c.pass(ctx, s, creds)
}
