package dns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
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

	// Parallel bounds the groups passed at once; PerProject the groups of
	// one project among them, so that one project's many groups (or slow
	// DNS servers) cannot hold every slot while another's wait.
	Parallel, PerProject int
	// MaxBackoff bounds how long a run that keeps failing waits between
	// passes: after n failures in a row it is passed again after
	// 2^(n-1) intervals, at most MaxBackoff.
	MaxBackoff time.Duration

	allow *AllowLists
	// resolve looks a DNS server's host name up (net.DefaultResolver's).
	resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// now is the clock backoff is counted on.
	now func() time.Time

	// mu orders Set and Release with a pass's final write, so a run Set
	// again while its release pass ran is not deleted under it.
	mu sync.Mutex
}

// New is the controller over st's dns_runs collection; Run passes every
// interval.
func New(st *store.Store, connect Connector, log *zap.Logger, interval time.Duration) *Controller {
	return &Controller{
		runs:        store.NewRecords(st, RunsCollection, "dns run", func() *structpb.Struct { return &structpb.Struct{} }),
		leases:      store.NewLeases(st, LeaseCollection),
		Holder:      replicaName(),
		LeaseTTL:    30 * time.Second,
		connect:     connect,
		log:         log,
		every:       interval,
		PassTimeout: time.Minute,
		Parallel:    4,
		PerProject:  2,
		MaxBackoff:  10 * time.Minute,
		allow:       NewAllowLists(st),
		resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
		now: time.Now,
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
		if err := validate(i, group, r); err != nil {
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
			// Failures and NextTry are not kept: what was set is tried at
			// the next pass.
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
		s.Failures, s.NextTry = 0, ""
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
	return schedule(ctx, fairOrder(order), max(c.Parallel, 1), max(c.PerProject, 1), func(ctx context.Context, g string) error {
		return c.syncGroup(ctx, g, groups[g])
	})
}

// projectOf is the project of a group's store key (its first name).
func projectOf(group string) string {
	p, _, _ := strings.Cut(group, "/")
	return p
}

// fairOrder orders the groups one project at a time, round robin: the
// first group of each project, then the second of each... so that every
// project's first groups are among the first passed.
func fairOrder(groups []string) []string {
	var projects []string
	queues := map[string][]string{}
	for _, g := range groups {
		p := projectOf(g)
		if _, ok := queues[p]; !ok {
			projects = append(projects, p)
		}
		queues[p] = append(queues[p], g)
	}
	out := make([]string, 0, len(groups))
	for len(out) < len(groups) {
		for _, p := range projects {
			if q := queues[p]; len(q) > 0 {
				out = append(out, q[0])
				queues[p] = q[1:]
			}
		}
	}
	return out
}

// schedule runs fn on every group, in order, at most parallel at once and
// at most perProject of one project at once: a group whose project has
// perProject running waits, and the next group of another project goes
// first. It answers the first error once every started group is done;
// once ctx is done no group is started.
func schedule(ctx context.Context, groups []string, parallel, perProject int, fn func(context.Context, string) error) error {
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		running  = map[string]int{}
		total    int
		firstErr error
		wg       sync.WaitGroup
	)
	pending := slices.Clone(groups)
	mu.Lock()
	for len(pending) > 0 && ctx.Err() == nil {
		i := -1
		if total < parallel {
			i = slices.IndexFunc(pending, func(g string) bool { return running[projectOf(g)] < perProject })
		}
		if i < 0 {
			cond.Wait()
			continue
		}
		g := pending[i]
		pending = slices.Delete(pending, i, i+1)
		running[projectOf(g)]++
		total++
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := fn(ctx, g)
			mu.Lock()
			defer mu.Unlock()
			running[projectOf(g)]--
			total--
			if err != nil && firstErr == nil {
				firstErr = err
			}
			cond.Broadcast()
		}()
	}
	mu.Unlock()
	wg.Wait()
	return firstErr
}

// backoff is how long after a pass that failed n times in a row the next
// may start: 2^(n-1) intervals, at most MaxBackoff, less half an interval
// so that the pass it aims at is not missed by the ticker's jitter.
func (c *Controller) backoff(n int) time.Duration {
	d := c.every
	for i := 1; i < n && d < c.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, max(c.MaxBackoff, c.every)) - c.every/2
}

func (c *Controller) syncRun(ctx context.Context, it store.Item[*structpb.Struct]) error {
	s, err := fromStruct(it.Msg)
	if err != nil {
		return err
	}
	started := c.now()
	if t, err := time.Parse(time.RFC3339Nano, s.NextTry); err == nil && started.Before(t) {
		c.log.Debug("dns run backing off", zap.String("run", it.ID), zap.Int("failures", s.Failures), zap.Time("next", t))
		return nil
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
			// A short cause of DCM's own words: never the dial error or
			// the server's answer, which are logged above.
			cur.LastError = shortCause(passErr)
			cur.Failures++
			cur.NextTry = started.Add(c.backoff(cur.Failures)).UTC().Format(time.RFC3339Nano)
		} else {
			cur.LastError, cur.LastSync, cur.Records = "", time.Now().UTC().Format(time.RFC3339Nano), records
			cur.Failures, cur.NextTry = 0, ""
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
			records, err = nil, because(fmt.Errorf("pass panicked: %v", p), "the pass failed")
		}
	}()
	return c.pass(ctx, s, creds)
}

// causeError is a pass's failure as its run's status shows it: a short
// cause in DCM's words. The error under it (a dial error, what a DNS
// server or a cluster answered) is logged only: a status that told a
// refused connection from a timeout would make DNS runs a port scanner.
type causeError struct {
	cause string
	err   error
}

func (e *causeError) Error() string {
	if e.err == nil {
		return e.cause
	}
	return e.cause + ": " + e.err.Error()
}

func (e *causeError) Unwrap() error { return e.err }

// because wraps err (nil: none) under a short cause.
func because(err error, format string, args ...any) error {
	return &causeError{cause: fmt.Sprintf(format, args...), err: err}
}

// shortCause is what a run's status shows of a pass's error: its cause,
// or the message of a check of DCM's own (a parameter refused); anything
// else is not shown.
func shortCause(err error) string {
	var ce *causeError
	if errors.As(err, &ce) {
		return ce.cause
	}
	if errs.Code(err) == codes.InvalidArgument {
		return err.Error()
	}
	return "the pass failed (the traffic service's log has the detail)"
}
