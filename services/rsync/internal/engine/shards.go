package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/dcm-project/dcm/platform/store"
)

// Replicas (docs/rsync.md, "Replicas"): clusters are split into shards
// (fnv32 of provider/cluster modulo Config.Shards), and a replica works
// only on the clusters of shards whose lease it holds in the store
// (collection rsync_leases, platform/store.Leases). Every replica keeps
// every rollout's desired state (replicas.go polls for the changes others
// make) and answers the whole API; only the work on clusters is split.
//
// Each tick (Config.LeaseRenew) a replica renews all its leases in one
// write, lists them, and takes free or expired shards up to its share
// (the shards over the live replicas, which hold member leases), yielding
// what it has beyond its share. A replica that cannot renew for
// Config.LeaseTTL*6/10 stops working its shards before the leases can
// expire, so that no cluster is worked by two replicas at once; the epoch
// of a shard's lease is written in each cluster state (StoredClusterState
// .epoch) and a state written under an older epoch is overwritten, never
// trusted (statuswriter.go).

var heldShards = promauto.NewGauge(prometheus.GaugeOpts{
	Name: "dcm_rsync_shards_held",
	Help: "Shards of clusters whose lease this replica holds.",
})

// shardLease is a shard this replica holds.
type shardLease struct {
	epoch int64
	// ctx ends when the shard is lost or yielded: the passes of its
	// clusters run under it.
	ctx    context.Context
	cancel context.CancelFunc
	passes sync.WaitGroup
}

// shards is the replica's part of the lease protocol: it holds the
// leases, takes and yields shards, and says which shards are held; held is
// guarded by mu (the board's).
type shards struct {
	mu  *sync.Mutex
	log *zap.Logger
	// take starts the work on newly held shards (replicas.activate).
	take   func(ctx context.Context, got []store.Lease)
	leases *store.Leases
	name   string // the replica's name, stable across its restarts
	holder string // name + "#" + this run
	n      int
	ttl    time.Duration
	every  time.Duration
	margin time.Duration
	held   map[int]*shardLease
	// watchdog drops every shard when no renewal succeeded for margin.
	watchdog *time.Timer
}

func newShards(st *store.Store, cfg Config, mu *sync.Mutex, log *zap.Logger) *shards {
	name := cfg.Replica
	if name == "" {
		host, _ := os.Hostname()
		name = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	return &shards{
		mu: mu, log: log,
		leases: store.NewLeases(st, LeaseCollection),
		name:   name, holder: name + "#" + strconv.FormatInt(time.Now().UnixNano(), 36),
		n: cfg.Shards, ttl: cfg.LeaseTTL, every: cfg.LeaseRenew, margin: cfg.LeaseTTL * 6 / 10,
		held: map[int]*shardLease{},
	}
}

// shardOf is the shard of a cluster.
func shardOf(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

func shardLeaseName(i int) string { return fmt.Sprintf("shard/%03d", i) }

func memberLeaseName(holder string) string { return "member/" + holder }

// sameReplica says whether holder is an earlier run of this replica.
func (s *shards) sameReplica(holder string) bool {
	name, _, ok := strings.Cut(holder, "#")
	return ok && name == s.name && holder != s.holder
}

// active is the lease of shard i if this replica holds it. Called with mu
// held.
func (s *shards) active(i int) *shardLease { return s.held[i] }

// epochOf is the epoch of the lease under which t's state may be written;
// false when this replica does not hold t's shard. Called with mu held.
func (s *shards) epochOf(t *task) (int64, bool) {
	sl := s.active(shardOf(clusterKey(t.provider, t.cluster), s.n))
	if sl == nil {
		return 0, false
	}
	return sl.epoch, true
}

// runLeases keeps this replica's leases until lctx ends; then it stops
// the work on its shards and yields them, so that the others take over at
// once rather than when the leases expire. It takes no new shard once the
// engine's ctx ended (the engine is stopping and saving its states).
func (s *shards) runLeases(lctx, ctx context.Context) {
	s.watchdog = time.AfterFunc(time.Hour, func() {
		s.log.Warn("could not renew the shard leases in time: stopping the work on their clusters", zap.Duration("margin", s.margin))
		s.dropShards(nil)
	})
	defer s.watchdog.Stop()
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		s.leaseTick(lctx, ctx)
		select {
		case <-lctx.Done():
			s.yieldAll()
			return
		case <-tick.C:
		}
	}
}

// leaseTick renews, lists, drops what was lost, takes what is free up to
// this replica's share and yields the excess.
func (s *shards) leaseTick(lctx, ctx context.Context) {
	start := time.Now()
	tctx, cancel := context.WithTimeout(lctx, s.every)
	defer cancel()
	if _, err := s.leases.RenewAll(tctx, s.holder, s.ttl); err != nil {
		if lctx.Err() == nil {
			s.log.Warn("renew shard leases", zap.Error(err))
		}
		return
	}
	list, err := s.leases.List(tctx)
	if err != nil {
		if lctx.Err() == nil {
			s.log.Warn("list shard leases", zap.Error(err))
		}
		return
	}
	now := time.Now()
	mine, members := map[int]store.Lease{}, map[string]bool{}
	var free []store.Lease // expired or an earlier run's
	taken := map[int]bool{}
	for _, l := range list {
		live := l.Expires.After(now)
		if h, ok := strings.CutPrefix(l.Name, "member/"); ok {
			if live && !s.sameReplica(h) {
				members[h] = true
			}
			continue
		}
		i, ok := parseShard(l.Name, s.n)
		if !ok {
			continue
		}
		taken[i] = true
		switch {
		case l.Holder == s.holder && live:
			mine[i] = l
		case !live || s.sameReplica(l.Holder):
			free = append(free, l)
		}
	}
	lost, idle := s.keepShards(mine)
	if lost > 0 {
		s.log.Warn("shard leases taken over by another replica", zap.Int("shards", lost))
	}
	s.watchdog.Reset(s.margin - time.Since(start))
	if ctx.Err() != nil {
		return
	}
	if !members[s.holder] { // first tick, or it expired while the store was away
		if _, err := s.leases.Acquire(tctx, memberLeaseName(s.holder), s.holder, s.ttl); err != nil && !isHeld(err) {
			s.log.Warn("acquire member lease", zap.Error(err))
		}
		members[s.holder] = true
	}
	share := (s.n + len(members) - 1) / len(members)
	got := idle // still ours, but dropped when a renewal came late
	for i := 0; i < s.n && len(mine)+len(got)-len(idle) < share; i++ {
		if !taken[i] {
			l, err := s.leases.Acquire(tctx, shardLeaseName(i), s.holder, s.ttl)
			if err == nil {
				got = append(got, l)
			}
		}
	}
	for _, l := range free {
		if len(mine)+len(got)-len(idle) >= share {
			break
		}
		if nl, err := s.leases.Supersede(tctx, l, s.holder, s.ttl); err == nil {
			got = append(got, nl)
		}
	}
	if len(got) > 0 {
		s.take(ctx, got)
	}
	if extra := len(mine) + len(got) - len(idle) - share; extra > 0 {
		s.yieldSome(ctx, extra)
	}
}

func isHeld(err error) bool {
	var held *store.HeldError
	return errors.As(err, &held)
}

func parseShard(name string, n int) (int, bool) {
	v, ok := strings.CutPrefix(name, "shard/")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(v)
	return i, err == nil && i >= 0 && i < n
}

// keepShards drops the held shards that are not in mine (taken over); it
// returns how many it dropped and the leases of mine that are not being
// worked on (dropped by the watchdog while a renewal was late: the leases
// did not expire, so they are taken up again under the same epoch).
func (s *shards) keepShards(mine map[int]store.Lease) (int, []store.Lease) {
	s.mu.Lock()
	var gone []int
	for i := range s.held {
		if _, ok := mine[i]; !ok {
			gone = append(gone, i)
		}
	}
	var idle []store.Lease
	for i, l := range mine {
		if s.held[i] == nil {
			idle = append(idle, l)
		}
	}
	s.mu.Unlock()
	if len(gone) > 0 {
		s.dropShards(gone)
	}
	return len(gone), idle
}

// dropShards stops the work on shards (nil: all held) at once: their
// passes end at their next step and their states are no longer written.
func (s *shards) dropShards(which []int) []*shardLease {
	s.mu.Lock()
	defer s.mu.Unlock()
	if which == nil {
		for i := range s.held {
			which = append(which, i)
		}
	}
	var out []*shardLease
	for _, i := range which {
		if sl, ok := s.held[i]; ok {
			sl.cancel()
			delete(s.held, i)
			out = append(out, sl)
		}
	}
	heldShards.Set(float64(len(s.held)))
	return out
}

// yieldSome gives up n of the held shards (the highest numbered) once
// their passes stopped, for a replica that joined.
func (s *shards) yieldSome(ctx context.Context, n int) {
	s.mu.Lock()
	var ids []int
	for i := range s.held {
		ids = append(ids, i)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	ids = ids[len(ids)-min(n, len(ids)):]
	s.yield(ctx, ids)
}

// yieldAll gives up every held shard (a graceful stop).
func (s *shards) yieldAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.yield(ctx, nil)
	if err := s.leases.Release(ctx, store.Lease{Name: memberLeaseName(s.holder), Holder: s.holder, Epoch: 1}); err != nil {
		s.log.Warn("release member lease", zap.Error(err))
	}
}

// yield stops the work on shards (nil: all), waits for their passes and
// hands their leases back with their epochs.
func (s *shards) yield(ctx context.Context, which []int) {
	list, err := s.leases.List(ctx)
	dropped := s.dropShards(which)
	for _, sl := range dropped {
		sl.passes.Wait()
	}
	if err != nil || len(dropped) == 0 {
		return // they expire by themselves
	}
	want := map[string]bool{}
	for _, i := range which {
		want[shardLeaseName(i)] = true
	}
	for _, l := range list {
		if l.Holder != s.holder || strings.HasPrefix(l.Name, "member/") || (which != nil && !want[l.Name]) {
			continue
		}
		if err := s.leases.Yield(ctx, l); err != nil {
			s.log.Debug("yield shard lease", zap.String("lease", l.Name), zap.Error(err))
		}
	}
}
