package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// One owner per object on a cluster: every object rsync applies carries
// the annotation OwnerAnnotation naming its owner, and is applied under
// that owner's own field manager. An object another owner manages, or one
// DCM did not create, is never changed nor deleted.

const (
	// OwnerAnnotation is stamped on every object rsync applies; its value
	// is the owner id the object was applied for.
	OwnerAnnotation = "dcm.io/owner"
	// LegacyFieldManager is the field manager rsync applied with before
	// each owner had its own; an object of an owner may still carry fields
	// it manages.
	LegacyFieldManager = "dcm"
	// maxFieldManager is the longest field manager the API server accepts.
	maxFieldManager = 128
)

// FieldManager is owner's server-side apply field manager: "dcm/<owner>",
// or, when that is longer than the API server accepts (128 bytes),
// "dcm/sha256:" and 16 hex digits of the owner's SHA-256 (an owner id has
// no ':', so the two forms never collide).
func FieldManager(owner string) string {
	if m := "dcm/" + owner; len(m) <= maxFieldManager {
		return m
	}
	sum := sha256.Sum256([]byte(owner))
	return "dcm/sha256:" + hex.EncodeToString(sum[:8])
}

// protectedNamespaces are never adopted nor deleted, whatever a record
// says: the cluster's own.
var protectedNamespaces = map[string]bool{"default": true, "kube-system": true, "kube-public": true, "kube-node-lease": true}

// standing is where a live object stands for an owner.
type standing int

const (
	// standingFree: there is no such object.
	standingFree standing = iota
	// standingOurs: its annotation names the owner.
	standingOurs
	// standingAdoptable: no annotation, but rsync's record says it applied
	// the object for the owner and a DCM field manager has fields in it:
	// applied before objects were stamped. The next apply stamps it.
	standingAdoptable
	// standingOther: its annotation names another owner.
	standingOther
	// standingUnmanaged: it exists and DCM did not create it.
	standingUnmanaged
)

// standingOf says where live (nil: not there) stands for owner; recorded
// says whether rsync's record for owner on this cluster holds it as
// applied. other is the owner the annotation names.
func standingOf(live *unstructured.Unstructured, owner string, recorded bool) (s standing, other string) {
	if live == nil {
		return standingFree, ""
	}
	if isProtected(live) {
		return standingUnmanaged, ""
	}
	switch o := live.GetAnnotations()[OwnerAnnotation]; {
	case o == owner:
		return standingOurs, o
	case o != "":
		return standingOther, o
	}
	if recorded && managedBy(live, LegacyFieldManager, FieldManager(owner)) {
		return standingAdoptable, ""
	}
	return standingUnmanaged, ""
}

func isProtected(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Namespace" && protectedNamespaces[u.GetName()]
}

// managedBy says whether one of managers has fields in u.
func managedBy(u *unstructured.Unstructured, managers ...string) bool {
	for _, f := range u.GetManagedFields() {
		for _, m := range managers {
			if f.Manager == m {
				return true
			}
		}
	}
	return false
}

// hasLabels says whether u carries every label of want.
func hasLabels(u *unstructured.Unstructured, want map[string]string) bool {
	have := u.GetLabels()
	for k, v := range want {
		if cur, ok := have[k]; !ok || cur != v {
			return false
		}
	}
	return true
}

// stamped is obj with the owner annotation set to owner and ManagedLabel.
func stamped(obj *unstructured.Unstructured, owner string) *unstructured.Unstructured {
	out := obj.DeepCopy()
	ann := out.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[OwnerAnnotation] = owner
	out.SetAnnotations(ann)
	labels := out.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedLabel] = "true" // what the drift watches select (driftwatch.go)
	out.SetLabels(labels)
	return out
}

// objectName is how messages name an object: Kind "name" or
// Kind "namespace/name".
func objectName(kind, namespace, name string) string {
	if namespace == "" {
		return fmt.Sprintf("%s %q", kind, name)
	}
	return fmt.Sprintf("%s %q", kind, namespace+"/"+name)
}

// refused is the terminal error of an object another owner manages.
func refused(kind, namespace, name, other string) error {
	return Terminal(fmt.Errorf("%s is managed by %s: refused", objectName(kind, namespace, name), other))
}

// unmanaged is the terminal error of an object DCM did not create.
func unmanaged(kind, namespace, name string) error {
	return Terminal(fmt.Errorf("%s exists on the cluster and is not managed by DCM (no %s annotation): refused",
		objectName(kind, namespace, name), OwnerAnnotation))
}

// isFieldConflict says whether err is a server-side apply conflict: a
// field another field manager owns with another value.
func isFieldConflict(err error) bool {
	var status apierrors.APIStatus
	if err == nil || !errors.As(err, &status) || status.Status().Code != http.StatusConflict || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == metav1.CauseTypeFieldManagerConflict {
			return true
		}
	}
	return false
}

// conflictManagers lists the field managers an apply conflict names; nil
// if one cannot be read. The API server words each cause `conflict with
// "<manager>"`, possibly followed by a subresource or an API version.
func conflictManagers(err error) []string {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	var out []string
	for _, c := range status.Status().Details.Causes {
		if c.Type != metav1.CauseTypeFieldManagerConflict {
			continue
		}
		rest, ok := strings.CutPrefix(c.Message, "conflict with ")
		if !ok {
			return nil
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return nil
		}
		m, err := strconv.Unquote(q)
		if err != nil {
			return nil
		}
		out = append(out, m)
	}
	return out
}

// onlyLegacy says whether every field an apply conflicts on belongs to the
// legacy field manager.
func onlyLegacy(err error) bool {
	ms := conflictManagers(err)
	for _, m := range ms {
		if m != LegacyFieldManager {
			return false
		}
	}
	return len(ms) > 0
}

// claimant is the owner rsync's record says manages an object on a
// cluster; "" if none. Called with mu held.
func (b *board) claimant(cluster, key string) string { return b.claims[cluster][key] }

// setOwned records whether t's resource r is its owner's on the cluster,
// in r and in the claims index. Called with mu held.
func (b *board) setOwned(t *task, r *rsyncv1.ResourceStatus, owned bool) {
	r.Owned = owned
	ck, key := clusterKey(t.provider, t.cluster), keyOf(r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName())
	owner := t.owner.rec.GetOwner()
	switch {
	case owned:
		if b.claims[ck] == nil {
			b.claims[ck] = map[string]string{}
		}
		b.claims[ck][key] = owner
	case b.claims[ck][key] == owner:
		delete(b.claims[ck], key)
	}
}

// indexClaims builds the claims index from the owned flags of every
// task. An object two owners' records both claim (objects applied by two
// owners before they were stamped) is left out: its annotation decides,
// the first owner to stamp it keeps it. Called with mu held.
func (b *board) indexClaims() {
	b.claims = map[string]map[string]string{}
	contested := map[string]bool{}
	for _, o := range b.owners {
		for ck, t := range o.tasks {
			for _, r := range t.state.GetResources() {
				if !r.GetOwned() {
					continue
				}
				key := keyOf(r.GetApiVersion(), r.GetKind(), r.GetNamespace(), r.GetName())
				if contested[ck+" "+key] {
					continue
				}
				if b.claims[ck] == nil {
					b.claims[ck] = map[string]string{}
				}
				if cur, ok := b.claims[ck][key]; ok && cur != o.rec.GetOwner() {
					delete(b.claims[ck], key)
					contested[ck+" "+key] = true
					continue
				}
				b.claims[ck][key] = o.rec.GetOwner()
			}
		}
	}
	if len(contested) > 0 {
		b.log.Warn("objects claimed by several owners' records; the first to stamp them keeps them", zap.Int("objects", len(contested)))
	}
}

// adoptLegacy sets the owned flags of a cluster state stored before rsync
// recorded them: every resource not deleted counts as applied for the
// owner. Its objects are adopted only if they show it (standingOf: no
// other owner's annotation, a DCM field manager has fields in them).
func adoptLegacy(st *rsyncv1.StoredClusterState) {
	for _, r := range st.GetResources() {
		r.Owned = r.GetOperation() != rsyncv1.Operation_OPERATION_DELETE || r.GetState() != rsyncv1.State_STATE_DELETED
	}
	st.OwnershipRecorded = true
}

// restamp makes the applied resources of a state stored before rsync
// stamped owners due again, so that each object gets its owner annotation
// once after the upgrade rather than at its next change.
func restamp(st *rsyncv1.StoredClusterState) {
	now := timestamppb.Now()
	for _, r := range st.GetResources() {
		if r.GetOperation() == rsyncv1.Operation_OPERATION_APPLY && r.GetState() == rsyncv1.State_STATE_APPLIED {
			r.State, r.Updated = rsyncv1.State_STATE_PENDING, now
		}
	}
}
