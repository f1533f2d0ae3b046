package engine

import (
	"context"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// The cluster states' store layout (docs/rsync.md, "Persistence"): each
// save of a cluster state is a new record, "<owner>/<provider>/<cluster>#<seq>",
// inserted, after which the previous one is deleted by its id. A second
// writer of the same seq is refused by the id's uniqueness, which is what
// a conditional update gave; but an insert and a delete by id are
// key lookups on any store, where the embedded one (FerretDB on SQLite)
// scans the whole collection for an update conditional on a version
// (docs/benchmarks.md). A writer stopped between the insert and the
// delete leaves two copies: readers keep the newest (newest) and delete
// the other. A record without "#" is a state saved before this layout;
// its version is its seq, and the next save replaces it.

// journalID is the id of seq, a save of a cluster state.
func journalID(owner, provider, cluster string, seq int64) string {
	return store.Key(owner, provider, cluster) + "#" + strconv.FormatInt(seq, 10)
}

// savedState is the newest save of one cluster state.
type savedState struct {
	msg *rsyncv1.StoredClusterState
	seq int64
	id  string
}

// newest keeps the newest save of each cluster state in items, and lists
// the ids of the older ones.
func newest(items []store.Item[*rsyncv1.StoredClusterState]) (keep []savedState, stale []string) {
	at := map[string]int{}
	for _, it := range items {
		key, seq := it.ID, it.Version
		if k, s, ok := strings.Cut(it.ID, "#"); ok {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				continue
			}
			key, seq = k, n
		}
		s := savedState{msg: it.Msg, seq: seq, id: it.ID}
		i, ok := at[key]
		switch {
		case !ok:
			at[key] = len(keep)
			keep = append(keep, s)
		case keep[i].seq < seq:
			stale = append(stale, keep[i].id)
			keep[i] = s
		default:
			stale = append(stale, s.id)
		}
	}
	return keep, stale
}

// dropStale deletes older saves found by newest.
func (rp *replicas) dropStale(ctx context.Context, ids []string) {
	for _, id := range ids {
		if err := rp.states.Delete(ctx, id); err != nil && errs.Code(err) != codes.NotFound {
			rp.log.Debug("delete an older save of a cluster state", zap.String("id", id), zap.Error(err))
		}
	}
}

// write saves snap as the save after seq (prev is seq's id, "" if none)
// and returns the new seq and id. If another replica saved that seq
// first under an older epoch (it held the shard before, and its last
// writes were late), snap is saved after it: this replica's state,
// loaded when it took the shard, is the one in charge. A save under a
// newer epoch means the shard is someone else's now: Aborted.
func (w *statusWriter) write(ctx context.Context, snap *rsyncv1.StoredClusterState, seq int64, prev string) (int64, string, error) {
	for range 3 {
		id := journalID(snap.GetOwner(), snap.GetProvider(), snap.GetCluster(), seq+1)
		err := w.states.Create(ctx, id, snap.GetOwner(), snap)
		w.writes.Add(1)
		if err == nil {
			if prev != "" {
				derr := w.states.Delete(ctx, prev)
				w.writes.Add(1)
				if derr != nil && errs.Code(derr) != codes.NotFound {
					w.log.Debug("delete the previous save of a cluster state; the next load does", zap.String("id", prev), zap.Error(derr))
				}
			}
			return seq + 1, id, nil
		}
		if errs.Code(err) != codes.AlreadyExists {
			return seq, prev, err
		}
		cur, gerr := w.states.Get(ctx, id)
		if gerr != nil {
			return seq, prev, gerr
		}
		if cur.Msg.GetEpoch() > snap.GetEpoch() {
			w.log.Warn("a replica with a newer lease saved this cluster's state: not overwritten",
				zap.String("id", id), zap.Int64("epoch", snap.GetEpoch()), zap.Int64("stored epoch", cur.Msg.GetEpoch()))
			return seq, prev, errs.Aborted("cluster state %s was saved under a newer lease", id)
		}
		if prev != "" {
			_ = w.states.Delete(ctx, prev)
		}
		seq, prev = seq+1, id
	}
	return seq, prev, errs.Aborted("cluster state of %s on %s/%s keeps being saved by another replica", snap.GetOwner(), snap.GetProvider(), snap.GetCluster())
}
