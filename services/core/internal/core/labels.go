package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Clusters by label (docs/logical-clouds.md): a logical cloud created with
// cluster-labels follows the cluster registry unless its
// spec.follow-labels is false. A cluster that comes to carry the labels
// is referenced and, if the logical cloud is applied, rolled out to; a
// cluster that a label put it on and that no longer carries them (or is
// gone from the registry) has its reference removed and the logical
// cloud's objects deleted from it. Each change is recorded, with its
// reason, in the logical cloud's lifecycle (label-changes, shown by GET
// .../status).
//
// Rsync streams the registry's changes (WatchClusters); core compares on
// each, at start and every DCM_LABELS_INTERVAL. Rsync never calls core.

// maxLabelChanges is how many label changes a logical cloud keeps.
const maxLabelChanges = 20

// The label changes' words.
const (
	labelJoined   = "joined"
	labelReleased = "released"
	labelFailed   = "failed"
	// labelRefused: the cluster carries the labels but the project's
	// cluster sets do not admit it (clustersets.go); it is not joined.
	labelRefused = "refused"
)

// registryRetryMax bounds the wait between attempts to watch the registry.
const registryRetryMax = 30 * time.Second

// Labels is the part that keeps label-selected logical clouds on the
// clusters that carry their labels.
type Labels struct {
	*cloudReader
	lifecycle  *Lifecycle
	references *References
	facts      *Facts
	locks      *keyLocks
	rsync      rsyncv1.RsyncInternalServiceClient
	registry   rsyncv1.RsyncServiceClient
	log        *zap.Logger
}

// followsLabels says whether logical cloud c follows the registry: it has
// cluster-labels and spec.follow-labels is not false.
func followsLabels(c *corev1.LogicalCloud) bool {
	s := c.GetSpec()
	return len(s.GetClusterLabels()) > 0 && (s.FollowLabels == nil || s.GetFollowLabels())
}

// FollowLabels is core's background loop: every following logical cloud
// compared with the registry at start, at each change rsync streams, and
// every interval.
func (l *Labels) FollowLabels(interval time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		if interval <= 0 {
			interval = time.Minute
		}
		kick := make(chan struct{}, 1)
		go l.watchRegistry(ctx, kick)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if err := l.FollowAll(ctx); err != nil && ctx.Err() == nil {
				l.log.Warn("follow the cluster registry; will retry", zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			case <-kick:
			}
		}
	}
}

// watchRegistry sends on kick at each message of rsync's registry stream
// (its first one too: a change missed while not watching), watching again
// after a failure.
func (l *Labels) watchRegistry(ctx context.Context, kick chan<- struct{}) {
	wait := time.Second
	for ctx.Err() == nil {
		stream, err := l.rsync.WatchClusters(ctx, &rsyncv1.WatchClustersRequest{})
		for err == nil {
			var m *rsyncv1.WatchClustersResponse
			if m, err = stream.Recv(); err == nil {
				wait = time.Second
				if m.GetInitial() || len(m.GetChanges()) > 0 {
					select {
					case kick <- struct{}{}:
					default: // a pass is due already
					}
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
		l.log.Debug("watch the cluster registry; again shortly", zap.Duration("in", wait), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, registryRetryMax)
	}
}

// FollowAll compares every following logical cloud with the registry. One
// whose lock another core replica holds is left to it.
func (l *Labels) FollowAll(ctx context.Context) error {
	all, err := l.clouds.Match(ctx, nil)
	if err != nil {
		return err
	}
	var failed []error
	for _, it := range all {
		project, lc, ok := strings.Cut(it.ID, "/")
		if it.Deleting || !ok || !followsLabels(it.Msg) {
			continue
		}
		err := l.follow(ctx, project, lc, it.Msg)
		if st, ok := status.FromError(err); ok && err != nil && errs.ReasonOf(st) == errs.ReasonConcurrentUpdate {
			continue // another replica holds it and acts
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("logical cloud %s: %w", it.ID, err))
		}
	}
	return errors.Join(failed...)
}

// labelDiff is how logical cloud c's clusters by label differ from the
// registry.
type labelDiff struct {
	// selected are the clusters that carry its labels now, by
	// "provider/cluster".
	selected map[string]*rsyncv1.SelectedCluster
	// joins are those of them its labels did not put it on and that the
	// project's cluster sets admit, ordered; releases those its labels put
	// it on that no longer carry them.
	joins, releases []string
	// refused are the clusters that would join but that the project's
	// sets do not admit, and that its label changes do not name as
	// refused yet (newly refused); why says why, by cluster.
	refused []string
	why     map[string]string
}

// none says there is nothing to do.
func (d labelDiff) none() bool {
	return len(d.joins) == 0 && len(d.releases) == 0 && len(d.refused) == 0
}

// diff compares logical cloud c of project with the registry.
func (l *Labels) diff(ctx context.Context, project string, c *corev1.LogicalCloud) (labelDiff, error) {
	sel, err := l.rsync.SelectClusters(ctx, &rsyncv1.SelectClustersRequest{Labels: c.GetSpec().GetClusterLabels()})
	if err != nil {
		return labelDiff{}, err
	}
	d := labelDiff{selected: map[string]*rsyncv1.SelectedCluster{}, why: map[string]string{}}
	for _, sc := range sel.GetClusters() {
		d.selected[clusterKey(sc.GetProvider(), sc.GetName())] = sc
	}
	was := c.GetLifecycle().GetLabelledClusters()
	var candidates []string
	for k := range d.selected {
		if !slices.Contains(was, k) {
			candidates = append(candidates, k)
		}
	}
	slices.Sort(candidates)
	if len(candidates) > 0 {
		g, err := l.references.sets.gate(ctx, project)
		if err != nil {
			return labelDiff{}, err
		}
		out, err := g.refused(ctx, candidates)
		if err != nil {
			return labelDiff{}, err
		}
		for _, k := range candidates {
			switch {
			case !slices.Contains(out, k):
				d.joins = append(d.joins, k)
			case lastChange(c, k) != labelRefused:
				d.refused = append(d.refused, k)
				d.why[k] = g.outside([]string{k})
			}
		}
	}
	for _, k := range was {
		if d.selected[k] == nil {
			d.releases = append(d.releases, k)
		}
	}
	return d, nil
}

// lastChange is the word of the newest of c's label changes of cluster k
// ("" if none).
func lastChange(c *corev1.LogicalCloud, k string) string {
	chs := c.GetLifecycle().GetLabelChanges()
	for i := len(chs) - 1; i >= 0; i-- {
		if clusterKey(chs[i].GetClusterProvider(), chs[i].GetClusterName()) == k {
			return chs[i].GetChange()
		}
	}
	return ""
}

// follow brings one logical cloud (c, as read without its lock) in line
// with the registry. The lock is taken only when the registry differs
// from c, so that a pass over unchanged logical clouds never makes a
// transition on another replica wait or refuse; under it, all is read
// again.
func (l *Labels) follow(ctx context.Context, project, lc string, c *corev1.LogicalCloud) error {
	if phaseOf(c) == phaseTerminating {
		// Terminating or terminated: nothing joins or leaves; an apply
		// selects by label again.
		return nil
	}
	if d, err := l.diff(ctx, project, c); err != nil || d.none() {
		return err
	}
	key := store.Key(project, lc)
	ctx, unlock, err := l.locks.lock(ctx, key, fmt.Sprintf("logical cloud %q", lc))
	if err != nil {
		return err
	}
	defer unlock()
	cur, err := l.versioned(ctx, project, lc)
	if errs.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		return err
	}
	c = cur.Msg
	if !followsLabels(c) || phaseOf(c) == phaseTerminating {
		return nil
	}
	st, err := l.lifecycle.status(ctx, project, lc, c)
	if err != nil {
		return err
	}
	labels := c.GetSpec().GetClusterLabels()
	d, err := l.diff(ctx, project, c)
	if err != nil || d.none() {
		return err
	}
	selected, joins, releases := d.selected, d.joins, d.releases
	refs, err := l.references.refs.List(ctx, key)
	if err != nil {
		return err
	}
	referenced := map[string]bool{}
	for _, r := range refs {
		referenced[clusterKey(r.GetClusterProvider(), r.GetClusterName())] = true
	}
	var changes []*corev1.LabelChange
	change := func(k, what, reason string) {
		provider, cluster, _ := strings.Cut(k, "/")
		changes = append(changes, &corev1.LabelChange{Time: timestamppb.Now(), ClusterProvider: provider, ClusterName: cluster,
			Change: what, Reason: fmt.Sprintf("cluster %s %s: %s", k, what, reason)})
	}
	for _, k := range d.refused {
		change(k, labelRefused, "it carries "+labelWords(labels)+", but "+d.why[k])
	}
	err = func() error {
		for _, k := range joins {
			change(k, labelJoined, "it carries "+labelWords(labels))
			if referenced[k] {
				continue
			}
			sc := selected[k]
			if err := l.references.addReference(ctx, project, lc, named(&corev1.ClusterReference{
				ClusterProvider: sc.GetProvider(), ClusterName: sc.GetName()})); err != nil {
				return err
			}
		}
		for _, k := range slices.Clone(releases) {
			reason, err := l.releaseReason(ctx, k, labels)
			if err != nil {
				return err
			}
			if reason == "" {
				// It carries the labels: it was missing from the selection
				// only while marked for a deletion (refused, or under way).
				releases = slices.DeleteFunc(releases, func(o string) bool { return o == k })
				continue
			}
			change(k, labelReleased, reason)
			if !referenced[k] {
				continue
			}
			provider, cluster, _ := strings.Cut(k, "/")
			if err := l.references.removeReference(ctx, project, lc, provider, cluster); err != nil {
				return err
			}
		}
		if len(joins) == 0 && len(releases) == 0 {
			return nil // refusals only: the clusters stay as they are
		}
		if err := l.facts.tellLocked(ctx, project, lc); err != nil {
			l.log.Warn("tell the services a logical cloud's clusters; the reconcile will", zap.String("logical_cloud", key), zap.Error(err))
		}
		if phaseOf(c) != phaseApplying || !slices.Contains(updateFrom, st.GetState()) || st.GetStopped() {
			// Not applied, or stopped by its operator: the references
			// follow, the clusters at the next apply or update.
			return nil
		}
		_, err := l.lifecycle.transitionLocked(ctx, "follow the cluster labels", project, lc, updateFrom, phaseApplying, l.lifecycle.rollOut(project, lc, true))
		return err
	}()
	if len(changes) == 0 {
		return err
	}
	if err != nil {
		// Recorded as failed, the labelled clusters unchanged: the next
		// pass tries again.
		for i, ch := range changes {
			changes[i] = &corev1.LabelChange{Time: ch.GetTime(), ClusterProvider: ch.GetClusterProvider(), ClusterName: ch.GetClusterName(),
				Change: labelFailed, Reason: ch.GetReason() + "; not done: " + errs.ToStatus(err).Message()}
		}
	}
	_, merr := l.clouds.Modify(context.WithoutCancel(ctx), key, func(c *corev1.LogicalCloud) error {
		if c.Lifecycle == nil {
			c.Lifecycle = &corev1.Lifecycle{}
		}
		lcy := c.Lifecycle
		if err == nil {
			next := slices.DeleteFunc(slices.Clone(lcy.GetLabelledClusters()), func(k string) bool { return slices.Contains(releases, k) })
			lcy.LabelledClusters = slices.Compact(slices.Sorted(slices.Values(append(next, joins...))))
		}
		for _, ch := range changes {
			if ch.GetChange() == labelFailed && slices.ContainsFunc(lcy.LabelChanges, func(o *corev1.LabelChange) bool { return o.GetReason() == ch.GetReason() }) {
				continue // the same failure again
			}
			lcy.LabelChanges = append(lcy.LabelChanges, ch)
		}
		if n := len(lcy.LabelChanges); n > maxLabelChanges {
			lcy.LabelChanges = lcy.LabelChanges[n-maxLabelChanges:]
		}
		return nil
	})
	return errors.Join(err, merr)
}

// releaseReason says why cluster k ("provider/cluster") no longer carries
// labels: the labels it lost, or that it is gone from the registry; ""
// if it carries them all.
func (l *Labels) releaseReason(ctx context.Context, k string, labels []string) (string, error) {
	provider, cluster, _ := strings.Cut(k, "/")
	resp, err := l.registry.GetCluster(ctx, &rsyncv1.GetClusterRequest{Provider: provider, Name: cluster})
	if errs.Code(err) == codes.NotFound {
		return "it was deleted from the registry", nil
	}
	if err != nil {
		return "", err
	}
	var lost []string
	for _, lb := range labels {
		if !slices.Contains(resp.GetCluster().GetSpec().GetLabels(), lb) {
			lost = append(lost, lb)
		}
	}
	if len(lost) == 0 {
		return "", nil
	}
	return "it no longer carries " + labelWords(lost), nil
}

// labelWords names labels in a reason: "label a" or "labels a, b".
func labelWords(labels []string) string {
	if len(labels) == 1 {
		return "label " + labels[0]
	}
	return "labels " + strings.Join(labels, ", ")
}
