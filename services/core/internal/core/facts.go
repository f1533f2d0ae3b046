package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	factsv1 "github.com/dcm-project/dcm/gen/dcm/facts/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Told once (docs/logical-clouds.md): the namespace, user, quota and
// traffic services hold no client of core. Core tells each of them a
// logical cloud's facts (typesv1.LogicalCloudFacts: level, namespace,
// users, clusters, being deleted) and they answer the parent checks of
// their public APIs from their own copy. Core tells
//
//   - at create, after storing its record and before making the parts:
//     a child that refuses fails the create, which is rolled back;
//   - when the facts change: a cluster reference or a user added or
//     removed (users.go; the level and namespace never change after
//     creation);
//   - at delete: "deleting" before each service's purge (a service not
//     told is not purged, and the cleanup loop retries), and the facts
//     forgotten after the purges, before core removes its own record;
//   - on start and every DCM_FACTS_INTERVAL, every live logical cloud's
//     facts again (Reconcile): a service that missed a tell, was down, or
//     runs on a store made before the facts existed converges.
//
// Every tell of a live logical cloud's facts holds the logical cloud's
// transition lock, as does every removal (DeleteLogicalCloud, abandon,
// the cleanup loop): a stale put can never land after a removal forgot the
// facts. A tell outside its create reads the record under the lock; the
// create's first tell holds it from before the insert and tells the
// record it stored (tellNew).

// FactsPeer is a program serving the facts contract
// (dcm.facts.v1.LogicalCloudFactsInternalService, platform/facts), named by
// the services it serves it for: one call tells them all.
type FactsPeer struct {
	Name   string
	Client factsv1.LogicalCloudFactsInternalServiceClient
}

// Facts tells the namespace, user, quota and traffic services the facts
// of the logical clouds, and forgets them there.
type Facts struct {
	clouds *store.Records[*corev1.LogicalCloud]
	refs   *store.Records[*corev1.ClusterReference]
	locks  *keyLocks
	peers  []FactsPeer
	log    *zap.Logger
}

// factsOf are the facts of logical cloud c of project referencing
// clusters ("provider/cluster").
func factsOf(project string, c *corev1.LogicalCloud, clusters []string) *typesv1.LogicalCloudFacts {
	f := &typesv1.LogicalCloudFacts{
		Project: project, Name: c.GetMetadata().GetName(),
		Level: c.GetSpec().GetLevel(), Namespace: c.GetSpec().GetNamespace(),
		Clusters: slices.Sorted(slices.Values(clusters)),
	}
	f.Users = usersOf(c)
	return f
}

// tell puts f in every service at once; the error names each service that
// refused.
func (s *Facts) tell(ctx context.Context, f *typesv1.LogicalCloudFacts) error {
	failed := make([]error, len(s.peers))
	var g errgroup.Group
	for i, p := range s.peers {
		g.Go(func() error {
			if _, err := p.Client.PutLogicalCloudFacts(ctx, &factsv1.PutLogicalCloudFactsRequest{Facts: f}); err != nil {
				failed[i] = fmt.Errorf("tell the %s the facts of logical cloud %q: %w", p.Name, f.GetName(), err)
			}
			return nil
		})
	}
	_ = g.Wait()
	return firstOf(failed)
}

// forget deletes the facts of logical cloud lc of project in every service.
func (s *Facts) forget(ctx context.Context, project, lc string) error {
	failed := make([]error, len(s.peers))
	var g errgroup.Group
	for i, p := range s.peers {
		g.Go(func() error {
			req := &factsv1.DeleteLogicalCloudFactsRequest{Project: project, LogicalCloud: lc}
			if _, err := p.Client.DeleteLogicalCloudFacts(ctx, req); err != nil {
				failed[i] = fmt.Errorf("%s: forget logical cloud facts: %w", p.Name, err)
			}
			return nil
		})
	}
	_ = g.Wait()
	return firstOf(failed)
}

// firstOf is nil, the one error of errs or, for several, all joined with
// the first's code kept (errs.Code reads the first wrapped status).
func firstOf(failed []error) error {
	failed = slices.DeleteFunc(failed, func(err error) bool { return err == nil })
	switch len(failed) {
	case 0:
		return nil
	case 1:
		return failed[0]
	}
	return errors.Join(failed...)
}

// clustersOf lists the clusters logical cloud lc of project references,
// as "provider/cluster".
func (s *Facts) clustersOf(ctx context.Context, project, lc string) ([]string, error) {
	refs, err := s.refs.List(ctx, store.Key(project, lc))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, store.Key(r.GetClusterProvider(), r.GetClusterName()))
	}
	return out, nil
}

// retell tells every service the facts of logical cloud lc of project as
// stored now, under its transition lock (a removal holds it too). A
// logical cloud that is gone or being deleted is not told: its removal
// tells.
func (s *Facts) retell(ctx context.Context, project, lc string) error {
	ctx, unlock, err := s.locks.lock(ctx, store.Key(project, lc), fmt.Sprintf("logical cloud %q", lc))
	if err != nil {
		return err
	}
	defer unlock()
	return s.tellLocked(ctx, project, lc)
}

// tellLocked is retell for a caller that holds the logical cloud's lock.
func (s *Facts) tellLocked(ctx context.Context, project, lc string) error {
	c, err := s.clouds.Get(ctx, store.Key(project, lc))
	if errs.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		return err
	}
	clusters, err := s.clustersOf(ctx, project, lc)
	if err != nil {
		return err
	}
	return s.tell(ctx, factsOf(project, c.Msg, clusters))
}

// tellNew tells every service the facts of logical cloud c of project,
// just stored by a caller that has held its transition lock since before
// the insert: the record cannot have changed, so it is not read again;
// the references are (one added between the insert and this tell is in
// the facts).
func (s *Facts) tellNew(ctx context.Context, project string, c *corev1.LogicalCloud) error {
	clusters, err := s.clustersOf(ctx, project, c.GetMetadata().GetName())
	if err != nil {
		return err
	}
	return s.tell(ctx, factsOf(project, c, clusters))
}

// tellDeleting tells every service that logical cloud lc of project is
// being deleted (they answer as if it did not exist).
func (s *Facts) tellDeleting(ctx context.Context, project, lc string) error {
	return s.tell(ctx, &typesv1.LogicalCloudFacts{Project: project, Name: lc, Deleting: true})
}

// Reconcile tells every service the facts of every live logical cloud
// that it does not hold as they are, on start and then every interval
// until ctx ends, so that a service that missed a tell (it was down, or
// its store predates the facts) converges. A logical cloud whose lock
// another replica holds is told on the next round.
func (s *Facts) Reconcile(interval time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		if interval <= 0 {
			interval = time.Minute
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if n, err := s.ReconcileFacts(ctx); err != nil {
				s.log.Warn("tell the services the logical clouds' facts; will retry", zap.Int("told", n), zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}

// ReconcileFacts is one round of Reconcile: how many logical clouds were
// told, and the errors of those that were not. A round reads the logical
// clouds, their cluster references and each service's facts a page at a
// time (ListLogicalCloudFacts), and tells (retell: under the lock, from
// the record read again) only the logical clouds whose facts some service
// does not hold as the records say: a few store commands a round however
// many logical clouds there are, not eight for each. A service that
// cannot list its facts (down, or a program from before the list) is told
// every logical cloud, as every round did before.
func (s *Facts) ReconcileFacts(ctx context.Context) (int, error) {
	all, err := s.clouds.Match(ctx, nil)
	if err != nil {
		return 0, err
	}
	if !slices.ContainsFunc(all, func(it store.Item[*corev1.LogicalCloud]) bool { return !it.Deleting }) {
		// Nothing to tell: no service is called. (A core starting on an
		// empty store would otherwise resolve every service's name at
		// once, before kube-dns has them all, and gRPC's resolver then
		// backs off for seconds: the first create answered 503.)
		return 0, nil
	}
	refs, err := s.refs.Match(ctx, nil)
	if err != nil {
		return 0, err
	}
	clusters := map[string][]string{}
	for _, r := range refs {
		clusters[r.Parent] = append(clusters[r.Parent], store.Key(r.Msg.GetClusterProvider(), r.Msg.GetClusterName()))
	}
	held := make([]map[string]*typesv1.LogicalCloudFacts, len(s.peers))
	var g errgroup.Group
	for i, p := range s.peers {
		g.Go(func() error {
			h, err := heldFacts(ctx, p.Client)
			if err != nil {
				s.log.Info("the facts a service holds could not be listed: every logical cloud is told it",
					zap.String("service", p.Name), zap.Error(err))
			}
			held[i] = h
			return nil
		})
	}
	_ = g.Wait()
	told := 0
	var failed []error
	for _, it := range all {
		project, lc, ok := strings.Cut(it.ID, "/")
		if it.Deleting || !ok {
			continue // the cleanup loop tells and forgets it
		}
		want := factsOf(project, it.Msg, clusters[it.ID])
		if slices.IndexFunc(held, func(h map[string]*typesv1.LogicalCloudFacts) bool { return !proto.Equal(h[it.ID], want) }) < 0 {
			continue
		}
		err := s.retell(ctx, project, lc)
		if st, ok := status.FromError(err); ok && err != nil && errs.ReasonOf(st) == errs.ReasonConcurrentUpdate {
			continue // another replica holds its lock: the next round tells it
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("logical cloud %s: %w", it.ID, err))
			continue
		}
		told++
	}
	return told, errors.Join(failed...)
}

// heldFacts lists every fact a service holds, by "project/logical-cloud"
// (nil if it cannot: then none is taken as held).
func heldFacts(ctx context.Context, c factsv1.LogicalCloudFactsInternalServiceClient) (map[string]*typesv1.LogicalCloudFacts, error) {
	out := map[string]*typesv1.LogicalCloudFacts{}
	req := &factsv1.ListLogicalCloudFactsRequest{PageSize: store.MaxPageSize}
	for {
		resp, err := c.ListLogicalCloudFacts(ctx, req)
		if err != nil {
			return nil, err
		}
		for _, f := range resp.GetFacts() {
			out[store.Key(f.GetProject(), f.GetName())] = f
		}
		if resp.GetNextPageToken() == "" {
			return out, nil
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

// retellOrLog is retell after a change of the clusters referenced; a
// failure is logged and left to the next Reconcile (the change itself is
// stored).
func (s *Facts) retellOrLog(ctx context.Context, project, lc string) {
	if err := s.retell(context.WithoutCancel(ctx), project, lc); err != nil {
		s.log.Warn("tell the services a logical cloud's clusters; the reconcile will",
			zap.String("logical_cloud", store.Key(project, lc)), zap.Error(err))
	}
}
