package engine

import (
	"context"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// driftKindsEvery is how often the watcher looks for kinds newly applied
// on its cluster, to watch them.
const driftKindsEvery = 2 * time.Second

// driftWatcher finds drift on the clusters this replica works on and
// records it (driftrecord.go): the watches, the periodic compares and the
// repairs' outcomes. It holds the board for the tasks it reads and marks.
type driftWatcher struct {
	*board
	connect Connector
	// interval is Config.DriftInterval; negative: no drift is watched.
	interval time.Duration
}

// start runs watchDrift for one cluster until ctx ends, counted in
// the board's running so that Run waits for it. Called with mu held.
func (dw *driftWatcher) start(ctx context.Context, provider, cluster string) {
	if ctx == nil || dw.interval < 0 {
		return
	}
	dw.running.Add(1)
	go func() {
		defer dw.running.Done()
		dw.watchDrift(ctx, provider, cluster)
	}()
}

// watchDrift notices drift on one cluster until ctx ends: every object
// rsync applied there (state APPLIED, owned, no pass running on its task)
// is compared with its manifest every Config.DriftInterval (the first
// time at a random point of the first interval, so that clusters spread
// out), and on clusters whose client can watch (Kube), at once on each
// change a watch per kind, filtered by ManagedLabel, reports.
func (dw *driftWatcher) watchDrift(ctx context.Context, provider, cluster string) {
	ck := clusterKey(provider, cluster)
	full := time.NewTimer(rand.N(dw.interval) + time.Millisecond)
	defer full.Stop()
	kinds := time.NewTicker(driftKindsEvery)
	defer kinds.Stop()
	events := make(chan driftEvent, 8) // small: one per cluster, 10,000 of them at scale
	watches := map[schema.GroupVersionKind]context.CancelFunc{}
	defer func() {
		for _, stop := range watches {
			stop()
		}
	}()
	// What a watch reported while a pass ran on the object's task: looked
	// at again (read afresh) once the pass is over.
	pendingKeys := map[string]bool{}
	pendingKinds := map[schema.GroupVersionKind]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-full.C:
			if cl, err := dw.connect.Connect(ctx, provider, cluster); err == nil {
				dw.checkSome(ctx, cl, ck, "", nil, nil) // objects busy now: at the next compare
			}
			full.Reset(dw.interval)
		case <-kinds.C:
			cl, err := dw.connect.Connect(ctx, provider, cluster)
			if err != nil {
				continue
			}
			if w, ok := cl.(kindWatcher); ok {
				dw.syncWatches(ctx, w, ck, watches, events)
			}
			for key := range pendingKeys {
				pendingKeys[key] = dw.checkSome(ctx, cl, ck, key, nil, nil)
				if !pendingKeys[key] {
					delete(pendingKeys, key)
				}
			}
			for gvk := range pendingKinds {
				if !dw.checkSome(ctx, cl, ck, "", &gvk, nil) {
					delete(pendingKinds, gvk)
				}
			}
		case ev := <-events:
			cl, err := dw.connect.Connect(ctx, provider, cluster)
			if err != nil {
				continue
			}
			switch {
			case ev.resync:
				if dw.checkSome(ctx, cl, ck, "", &ev.gvk, nil) {
					pendingKinds[ev.gvk] = true
				}
			case ev.deleted: // look again: gone, or only out of the watch's selector
				if dw.checkSome(ctx, cl, ck, ev.key, nil, nil) {
					pendingKeys[ev.key] = true
				}
			default:
				if dw.checkSome(ctx, cl, ck, ev.key, nil, ev.obj) {
					pendingKeys[ev.key] = true
				}
			}
		}
	}
}

// checkSome compares the objects on cluster ck that may drift (key's
// only, if not empty; of kind gvk only, if not nil) as checkDrift does
// with seen. True if some could not be compared now, a pass being under
// way on their task.
func (dw *driftWatcher) checkSome(ctx context.Context, cl Cluster, ck, key string, gvk *schema.GroupVersionKind, seen *unstructured.Unstructured) bool {
	items, busy := dw.driftItems(ck, key)
	for _, it := range items {
		if gvk != nil && it.gvk != *gvk {
			continue
		}
		if !dw.checkDrift(ctx, cl, it, seen) {
			busy = true
		}
	}
	return busy
}

// driftItem is one applied object that may drift, as read under mu.
type driftItem struct {
	t       *task
	key     string
	gvk     schema.GroupVersionKind
	ns      string
	name    string
	want    *unstructured.Unstructured // the manifest as applied (stamped)
	updated time.Time                  // the resource's Updated when read
}

// driftItems lists the objects on cluster ck that may drift (only key's,
// if key is not empty): applied and owned by a rollout that is neither
// stopped nor deleting, on a task no pass is running on (busy: some task
// was left out for that). A CSR is left out: the cluster deletes it once
// issued, and it is not to be approved again.
func (dw *driftWatcher) driftItems(ck, key string) (out []driftItem, busy bool) {
	dw.mu.Lock()
	defer dw.mu.Unlock()
	for _, o := range dw.owners {
		t := o.tasks[ck]
		if t == nil || o.rec.GetStopped() || o.rec.GetDeleting() || o.waiting[ck] {
			continue
		}
		if t.cancel != nil {
			busy = true
			continue
		}
		for _, r := range t.state.GetResources() {
			k := keyOf(r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName())
			if key != "" && k != key || !appliedAndOwned(r) {
				continue
			}
			obj := t.desired[k]
			if obj == nil || obj.hash != r.GetManifestHash() || isCSR(obj.u.GroupVersionKind()) {
				continue
			}
			out = append(out, driftItem{
				t: t, key: k, gvk: obj.u.GroupVersionKind(), ns: obj.u.GetNamespace(), name: obj.u.GetName(),
				want: stamped(obj.u, o.rec.GetOwner()), updated: r.GetUpdated().AsTime(),
			})
		}
	}
	return out, busy
}

func appliedAndOwned(r *rsyncv1.ResourceStatus) bool {
	return r.GetOperation() == rsyncv1.Operation_OPERATION_APPLY && r.GetState() == rsyncv1.State_STATE_APPLIED && r.GetOwned()
}

// still is it's resource if nothing touched it since driftItems read it;
// nil otherwise. Called with mu held.
func (dw *driftWatcher) still(it driftItem) *rsyncv1.ResourceStatus {
	t := it.t
	o := t.owner
	if dw.owners[o.rec.GetOwner()] != o || o.tasks[clusterKey(t.provider, t.cluster)] != t ||
		t.cancel != nil || o.rec.GetStopped() || o.rec.GetDeleting() {
		return nil
	}
	for _, r := range t.state.GetResources() {
		if keyOf(r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName()) == it.key {
			if appliedAndOwned(r) && r.GetUpdated().AsTime().Equal(it.updated) {
				return r
			}
			return nil
		}
	}
	return nil
}

// checkDrift compares one applied object with its manifest and records
// the drift it finds. seen, if not nil, is the object as a watch reported
// it: if it shows no drift, the cluster is not asked; if it does, the
// object is read again (the event may be older than rsync's last apply).
// False if its resource changed meanwhile (a pass started): what was
// read is not recorded.
func (dw *driftWatcher) checkDrift(ctx context.Context, cl Cluster, it driftItem, seen *unstructured.Unstructured) bool {
	mine := FieldManager(it.t.owner.rec.GetOwner())
	if seen != nil {
		if fields, _ := driftOf(it.want, seen, mine); len(fields) == 0 {
			return true
		}
	}
	live, err := cl.Get(ctx, it.gvk, it.ns, it.name)
	gone := isGone(err)
	if err != nil && !gone {
		if ctx.Err() == nil {
			dw.log.Debug("drift: read the object; next time", zap.String("object", it.key), zap.Error(err))
		}
		return true
	}
	d := &rsyncv1.Drift{
		Time: timestamppb.Now(), ApiVersion: it.want.GetAPIVersion(), Kind: it.gvk.Kind,
		Namespace: it.ns, Name: it.name, Deleted: gone,
	}
	if !gone {
		if live.GetDeletionTimestamp() != nil {
			return true // being deleted: noticed once it is gone
		}
		d.Fields, d.Managers = driftOf(it.want, live, mine)
		if len(d.Fields) == 0 {
			return true
		}
	}
	dw.mu.Lock()
	defer dw.mu.Unlock()
	r := dw.still(it)
	if r != nil {
		dw.noteDrift(it.t, r, d)
	}
	return r != nil
}

// driftEvent is a watch's report of a change to an object rsync applied,
// or (resync) that a watch of gvk started afresh: what was deleted before
// it started is not in its first list, so every object of the kind is
// read once.
type driftEvent struct {
	key     string
	obj     *unstructured.Unstructured
	deleted bool
	resync  bool
	gvk     schema.GroupVersionKind
}

// kindWatcher is a cluster client that can watch the objects of a kind
// that carry ManagedLabel.
type kindWatcher interface {
	watchManaged(ctx context.Context, gvk schema.GroupVersionKind, resourceVersion string) (watch.Interface, error)
}

// syncWatches runs a watch for each kind applied on cluster ck and stops
// those of kinds no longer applied there.
func (dw *driftWatcher) syncWatches(ctx context.Context, w kindWatcher, ck string, watches map[schema.GroupVersionKind]context.CancelFunc, events chan<- driftEvent) {
	want := map[schema.GroupVersionKind]bool{}
	items, _ := dw.driftItems(ck, "")
	for _, it := range items {
		want[it.gvk] = true
	}
	for gvk, stop := range watches {
		if !want[gvk] {
			stop()
			delete(watches, gvk)
		}
	}
	for gvk := range want {
		if _, ok := watches[gvk]; ok {
			continue
		}
		wctx, stop := context.WithCancel(ctx)
		watches[gvk] = stop
		go dw.watchKind(wctx, w, gvk, events)
	}
}

// watchKind forwards the changes to one kind's managed objects until ctx
// ends, watching again from the last version seen whenever the API server
// ends a watch (from the start if that version is too old).
func (dw *driftWatcher) watchKind(ctx context.Context, w kindWatcher, gvk schema.GroupVersionKind, events chan<- driftEvent) {
	rv := ""
	delay := time.Second
	for ctx.Err() == nil {
		wi, err := w.watchManaged(ctx, gvk, rv)
		if err != nil {
			dw.log.Debug("drift: watch; again soon", zap.String("kind", gvk.String()), zap.Error(err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
				delay = min(2*delay, time.Minute)
			}
			continue
		}
		delay = time.Second
		if rv == "" {
			select {
			case events <- driftEvent{resync: true, gvk: gvk}:
			case <-ctx.Done():
				wi.Stop()
				return
			}
		}
		rv = dw.forward(ctx, wi, rv, events)
		wi.Stop()
	}
}

// forward sends one watch's events on until it ends; it returns the
// version to watch from next ("" to start over).
func (dw *driftWatcher) forward(ctx context.Context, wi watch.Interface, rv string, events chan<- driftEvent) string {
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return rv
		case ev, ok = <-wi.ResultChan():
		}
		if !ok {
			return rv
		}
		if ev.Type == watch.Error {
			if apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) || apierrors.IsGone(apierrors.FromObject(ev.Object)) {
				return ""
			}
			return rv
		}
		u, isU := ev.Object.(*unstructured.Unstructured)
		if !isU {
			continue
		}
		rv = u.GetResourceVersion()
		if ev.Type == watch.Bookmark {
			continue
		}
		de := driftEvent{key: keyOf(u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName()), obj: u, deleted: ev.Type == watch.Deleted}
		select {
		case events <- de:
		case <-ctx.Done():
			return rv
		}
	}
}

// watchManaged implements kindWatcher: a watch of gvk's objects in every
// namespace that carry ManagedLabel, from resourceVersion ("": the
// objects there now first, as added).
func (k *Kube) watchManaged(ctx context.Context, gvk schema.GroupVersionKind, resourceVersion string) (watch.Interface, error) {
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	return k.dyn.Resource(m.Resource).Watch(ctx, metav1.ListOptions{
		LabelSelector: ManagedLabel + "=true", ResourceVersion: resourceVersion, AllowWatchBookmarks: true,
	})
}
