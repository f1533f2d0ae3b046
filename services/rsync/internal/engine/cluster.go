package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster is what the engine does to one cluster. Errors are the API
// server's (apierrors) or transport errors; Terminal marks the others that
// retrying cannot fix.
type Cluster interface {
	// Apply server-side applies obj under the field manager manager and
	// returns the object as stored. A metadata.resourceVersion in obj makes
	// it conditional: a Conflict error if the object changed since.
	Apply(ctx context.Context, obj *unstructured.Unstructured, manager string, force bool) (*unstructured.Unstructured, error)
	// Get reads an object; a NotFound error if it is not there.
	Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error)
	// Delete deletes an object (in the background for its dependents) if
	// its UID is still uid (a Conflict error if not); an object already
	// gone is no error.
	Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID) error
	// ApproveCSR adds the Approved condition to a CertificateSigningRequest
	// read from the cluster, under the field manager manager.
	ApproveCSR(ctx context.Context, csr *unstructured.Unstructured, manager string) error
}

// Connector reaches registered clusters.
type Connector interface {
	// Known is nil if the cluster is registered, else a NotFound error.
	Known(ctx context.Context, provider, cluster string) error
	// Connect returns a client of the cluster.
	Connect(ctx context.Context, provider, cluster string) (Cluster, error)
}

// ErrNamespaced is wrapped by the error of a namespaced kind named without
// a namespace.
var ErrNamespaced = errors.New("namespaced kind without a namespace")

// terminalError is an error retrying cannot fix.
type terminalError struct{ error }

func (e terminalError) Unwrap() error { return e.error }

// Terminal marks err as one that retrying cannot fix.
func Terminal(err error) error { return terminalError{err} }

// Retryable tells errors worth retrying (the cluster is unreachable or
// overloaded, a namespace or CRD it depends on is not there yet) from
// terminal ones (the API server refused the object).
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	var term terminalError
	if errors.As(err, &term) {
		return false
	}
	if meta.IsNoMatchError(err) {
		return true
	}
	if isFieldConflict(err) {
		return false // a field another manager owns: retrying gives the same answer
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // transport: refused, reset, timed out, TLS
	}
	switch {
	case strings.Contains(status.Status().Message, "failed to create typed patch object"):
		// A server-side apply the API server cannot type (an unknown
		// field, a value of the wrong type): a 500 that the same manifest
		// gets every time.
		return false
	case apierrors.IsConflict(err):
		// Not a field conflict (above): the object changed under a
		// resourceVersion or UID precondition; look at it again.
		return true
	case apierrors.IsNotFound(err), apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err),
		apierrors.IsTimeout(err), apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsUnexpectedServerError(err):
		return true
	case apierrors.IsForbidden(err):
		// Objects can't be created in a namespace that is being deleted;
		// once it is gone, applying its Namespace again succeeds.
		return strings.Contains(status.Status().Message, "being terminated")
	default:
		return status.Status().Code >= 500
	}
}

// Kube is a real cluster through client-go's dynamic client, with a
// RESTMapper discovered once and reset when a kind is missing (a CRD was
// just established).
type Kube struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	// disc reaches the API server's non-resource paths (probe.go).
	disc discovery.DiscoveryInterface
}

// NewKube connects to the cluster of an admin kubeconfig.
func NewKube(kubeconfig []byte) (*Kube, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, Terminal(fmt.Errorf("kubeconfig: %w", err))
	}
	// client-go's default 5 QPS would pace a rollout, not protect the server.
	cfg.QPS, cfg.Burst = 100, 200
	cfg.Timeout = 20 * time.Second
	cfg.UserAgent = "dcm-rsync"
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, Terminal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, Terminal(err)
	}
	return &Kube{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), disc: dc}, nil
}

// resource maps gvk to its REST resource, scoped to namespace if the kind
// is namespaced.
func (k *Kube) resource(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		k.mapper.Reset()
		m, err = k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return k.dyn.Resource(m.Resource), nil
	}
	if namespace == "" {
		return nil, Terminal(fmt.Errorf("%s is namespaced: the manifest must set metadata.namespace: %w", gvk.Kind, ErrNamespaced))
	}
	return k.dyn.Resource(m.Resource).Namespace(namespace), nil
}

// Apply implements Cluster.
func (k *Kube) Apply(ctx context.Context, obj *unstructured.Unstructured, manager string, force bool) (*unstructured.Unstructured, error) {
	ri, err := k.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	// Server-side apply as the dynamic client's Apply sends it, with
	// fieldValidation=Strict (ApplyOptions cannot carry it): an unknown or
	// duplicate field is refused by the API server rather than dropped, so
	// no manifest is applied other than as written.
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: manager, Force: &force, FieldValidation: "Strict"})
}

// Create creates obj (it must not exist) as manager.
func (k *Kube) Create(ctx context.Context, obj *unstructured.Unstructured, manager string) (*unstructured.Unstructured, error) {
	ri, err := k.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	return ri.Create(ctx, obj, metav1.CreateOptions{FieldManager: manager, FieldValidation: "Strict"})
}

// Get implements Cluster.
func (k *Kube) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	ri, err := k.resource(gvk, namespace)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, name, metav1.GetOptions{})
}

// Delete implements Cluster. A kind the cluster no longer serves (its CRD
// is gone) has no objects left.
func (k *Kube) Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, uid types.UID) error {
	ri, err := k.resource(gvk, namespace)
	if meta.IsNoMatchError(err) {
		return nil
	}
	if err != nil {
		return err
	}
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err = ri.Delete(ctx, name, opts)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// ApproveCSR implements Cluster.
func (k *Kube) ApproveCSR(ctx context.Context, csr *unstructured.Unstructured, manager string) error {
	ri, err := k.resource(csr.GroupVersionKind(), "")
	if err != nil {
		return err
	}
	_, err = ri.Update(ctx, withApproval(csr), metav1.UpdateOptions{FieldManager: manager}, "approval")
	return err
}

// RequestToken asks the cluster's TokenRequest API for a token of a
// ServiceAccount that lives seconds, and returns it with its expiry (the
// cluster may shorten the lifetime).
func (k *Kube) RequestToken(ctx context.Context, namespace, serviceAccount string, seconds int64) (string, time.Time, error) {
	req := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"metadata": map[string]any{"name": serviceAccount, "namespace": namespace},
		"spec":     map[string]any{"expirationSeconds": seconds},
	}}
	out, err := k.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}).Namespace(namespace).
		Create(ctx, req, metav1.CreateOptions{}, "token")
	if err != nil {
		return "", time.Time{}, err
	}
	token, _, _ := unstructured.NestedString(out.Object, "status", "token")
	at, _, _ := unstructured.NestedString(out.Object, "status", "expirationTimestamp")
	exp, err := time.Parse(time.RFC3339, at)
	if token == "" || err != nil {
		return "", time.Time{}, fmt.Errorf("TokenRequest for ServiceAccount %s/%s: the answer has no token or expiry", namespace, serviceAccount)
	}
	return token, exp, nil
}

// withApproval is csr with the Approved condition added.
func withApproval(csr *unstructured.Unstructured) *unstructured.Unstructured {
	csr = csr.DeepCopy()
	conds, _, _ := unstructured.NestedSlice(csr.Object, "status", "conditions")
	conds = append(conds, map[string]any{
		"type": "Approved", "status": "True", "reason": "DCMApproved",
		"message":        "approved by DCM's resource synchronizer for its owner",
		"lastUpdateTime": time.Now().UTC().Format(time.RFC3339),
	})
	_ = unstructured.SetNestedSlice(csr.Object, conds, "status", "conditions")
	return csr
}

// CSRState reads a CSR's approval, whether it was denied or failed, and
// its certificate (base64, as stored; empty while not issued).
func CSRState(csr *unstructured.Unstructured) (approved, denied bool, cert string) {
	conds, _, _ := unstructured.NestedSlice(csr.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["status"] != "True" {
			continue
		}
		switch m["type"] {
		case "Approved":
			approved = true
		case "Denied", "Failed":
			denied = true
		}
	}
	cert, _, _ = unstructured.NestedString(csr.Object, "status", "certificate")
	return approved, denied, cert
}
