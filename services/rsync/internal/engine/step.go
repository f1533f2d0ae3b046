package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

var namespaceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}

// step applies or deletes one resource. namespaces caches, for a pass,
// what checkNamespace found.
func (p *applier) step(ctx context.Context, cl Cluster, in stepInfo, r *rsyncv1.ResourceStatus, obj *object, namespaces map[string]error) outcome {
	if r.GetOperation() == rsyncv1.Operation_OPERATION_DELETE {
		return p.remove(ctx, cl, in, r)
	}
	return p.apply(ctx, cl, in, obj, namespaces)
}

// apply applies one object for in.owner, stamped with the owner
// annotation, if the object is free or the owner's; another owner's object
// and one DCM did not create are refused (terminal) and never changed.
//
// Two owners creating the same object at once cannot both succeed: the
// create is a server-side apply (never forced) of the annotation under the
// owner's own field manager, and the API server applies it to whatever
// object is stored by then, so the second finds the first's annotation, a
// field another manager owns with another value: a conflict, reported as
// the refusal naming the first.
func (p *applier) apply(ctx context.Context, cl Cluster, in stepInfo, obj *object, namespaces map[string]error) outcome {
	u := obj.u
	kind, ns, name := u.GetKind(), u.GetNamespace(), u.GetName()
	if in.other != "" {
		return outcome{err: refused(kind, ns, name, in.other)}
	}
	if ns != "" {
		if err := p.checkNamespace(ctx, cl, in, ns, namespaces); err != nil {
			return outcome{err: err, owned: in.owned}
		}
	}
	live, err := cl.Get(ctx, u.GroupVersionKind(), ns, name)
	if isGone(err) {
		live, err = nil, nil
	}
	if err != nil {
		return outcome{err: err, owned: in.owned}
	}
	st, other := standingOf(live, in.owner, in.owned)
	switch st {
	case standingOther:
		return outcome{err: refused(kind, ns, name, other)}
	case standingUnmanaged:
		return outcome{err: unmanaged(kind, ns, name)}
	}
	mine := in.owned || st == standingOurs
	desired := stamped(u, in.owner)
	manager := FieldManager(in.owner)
	// An adoption is conditional on the object read: its annotation-less
	// state is what made it adoptable.
	conditional := func() {
		if st == standingAdoptable {
			desired.SetResourceVersion(live.GetResourceVersion())
		}
	}
	// A drift repair takes back the fields another manager changed.
	force := (p.forceConflicts || in.repair) && st != standingFree
	if force {
		conditional()
	}
	applied, err := cl.Apply(ctx, desired, manager, force)
	if !force && st != standingFree && isFieldConflict(err) && onlyLegacy(err) {
		// Fields the legacy manager applied for this same owner, before
		// managers were per owner: this owner takes them over.
		conditional()
		applied, err = cl.Apply(ctx, desired, manager, true)
	}
	if isFieldConflict(err) {
		// Lost the object to another owner since it was read?
		if cur, gerr := cl.Get(ctx, u.GroupVersionKind(), ns, name); gerr == nil {
			if o := cur.GetAnnotations()[OwnerAnnotation]; o != "" && o != in.owner {
				return outcome{err: refused(kind, ns, name, o), owned: false}
			}
		}
		return outcome{err: Terminal(err), owned: mine}
	}
	if err != nil {
		return outcome{err: err, owned: mine}
	}
	if isCSR(u.GroupVersionKind()) {
		return outcome{err: p.certify(ctx, cl, applied, manager), owned: true}
	}
	return outcome{owned: true}
}

// checkNamespace refuses a namespaced object whose Namespace is not the
// owner's: one this rollout applies that was refused or failed, or one
// another owner manages. A Namespace DCM did not create (kube-system) is
// no reason to refuse; the object itself is checked after this.
func (p *applier) checkNamespace(ctx context.Context, cl Cluster, in stepInfo, ns string, namespaces map[string]error) error {
	switch {
	case in.nsOwned > 0:
		return nil
	case in.nsOwned < 0:
		return Terminal(fmt.Errorf("%s is not this owner's (its apply failed or was refused): refused", objectName("Namespace", "", ns)))
	case in.nsOther != "":
		return refused("Namespace", "", ns, in.nsOther)
	}
	if err, ok := namespaces[ns]; ok {
		return err
	}
	live, err := cl.Get(ctx, namespaceGVK, "", ns)
	switch {
	case isGone(err):
		return nil // the apply finds it missing and retries
	case err != nil:
		return err
	}
	var verdict error
	if o := live.GetAnnotations()[OwnerAnnotation]; o != "" && o != in.owner && (in.host == "" || o != in.host) {
		verdict = refused("Namespace", "", ns, o)
	}
	namespaces[ns] = verdict
	return verdict
}

// certify is the CSR step: approve it, then wait for the signer to issue
// the certificate.
func (p *applier) certify(ctx context.Context, cl Cluster, csr *unstructured.Unstructured, manager string) error {
	approved, denied, cert := CSRState(csr)
	if denied {
		return Terminal(fmt.Errorf("CertificateSigningRequest %s was denied or failed", csr.GetName()))
	}
	if cert != "" {
		return nil
	}
	if !approved {
		if err := cl.ApproveCSR(ctx, csr, manager); err != nil {
			return err
		}
	}
	return waitFor(ctx, p.certificateWait, func() (bool, error) {
		cur, err := cl.Get(ctx, csr.GroupVersionKind(), "", csr.GetName())
		if err != nil {
			return false, err
		}
		_, denied, cert := CSRState(cur)
		if denied {
			return false, Terminal(fmt.Errorf("CertificateSigningRequest %s was denied or failed", csr.GetName()))
		}
		return cert != "", nil
	}, fmt.Sprintf("waiting for the signer to issue CertificateSigningRequest %s's certificate", csr.GetName()))
}

// remove deletes one object of in.owner's and waits until it is gone. It
// deletes only an object whose annotation names the owner, or one applied
// for the owner before objects were stamped (rsync's record says so, a DCM
// field manager has fields in it, and it still carries the labels of the
// manifest applied). Anything else is left on the cluster: the resource is
// deleted as far as the owner is concerned, with a note saying why the
// object is still there.
func (p *applier) remove(ctx context.Context, cl Cluster, in stepInfo, r *rsyncv1.ResourceStatus) outcome {
	gvk := schemaGVK(r.GetApiVersion(), r.GetKind())
	kind, ns, name := r.GetKind(), r.GetNamespace(), r.GetName()
	live, err := cl.Get(ctx, gvk, ns, name)
	if isGone(err) {
		return outcome{}
	}
	if err != nil {
		return outcome{err: err, owned: in.owned}
	}
	st, other := standingOf(live, in.owner, in.owned)
	if in.other != "" {
		st, other = standingOther, in.other // rsync's record says so: never delete it
	}
	switch {
	case st == standingOurs:
	case st == standingAdoptable && in.labelsKnown && hasLabels(live, in.labels):
	default:
		note := "left on the cluster, not deleted: "
		switch st {
		case standingOther:
			note += fmt.Sprintf("%s is managed by %s", objectName(kind, ns, name), other)
		case standingAdoptable:
			note += fmt.Sprintf("%s has no %s annotation and not the labels this owner applied", objectName(kind, ns, name), OwnerAnnotation)
		default:
			note += fmt.Sprintf("%s is not managed by DCM", objectName(kind, ns, name))
		}
		p.log.Info("delete: object is not the owner's; left on the cluster",
			zap.String("owner", in.owner), zap.String("object", describe(r.GetApiVersion(), kind, ns, name)), zap.String("why", note))
		return outcome{note: note}
	}
	uid := live.GetUID()
	// An object already being deleted (a Namespace its controller is
	// emptying, one with finalizers: a retry after the last wait ran out)
	// is waited for, not deleted again.
	if live.GetDeletionTimestamp() == nil {
		if err := cl.Delete(ctx, gvk, ns, name, uid); err != nil {
			return outcome{err: err, owned: true}
		}
	}
	err = waitFor(ctx, p.deleteWait, func() (bool, error) {
		cur, err := cl.Get(ctx, gvk, ns, name)
		if isGone(err) {
			return true, nil
		}
		return err == nil && cur.GetUID() != uid, err
	}, fmt.Sprintf("waiting for %s to be gone", describe(r.GetApiVersion(), kind, ns, name)))
	if err != nil {
		return outcome{err: err, owned: true}
	}
	return outcome{}
}

// waitFor polls cond until it holds, fails, or wait passes; then it is a
// retryable error saying what it waited for.
func waitFor(ctx context.Context, wait time.Duration, cond func() (bool, error), what string) error {
	deadline := time.Now().Add(wait)
	delay := 50 * time.Millisecond
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New(what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
			delay = min(2*delay, time.Second)
		}
	}
}
