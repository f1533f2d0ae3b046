package rsync

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// renewWait is how long RenewCertificate waits for the signer.
const renewWait = 20 * time.Second

// RenewsAnnotation is on a renewal CertificateSigningRequest: the name of
// the one it renews.
const RenewsAnnotation = "dcm.io/renews"

// renewals keeps, per cluster and CertificateSigningRequest, the freshest
// certificate RenewCertificate obtained, tied to that request's UID (a
// request deleted and made again starts over). Memory only: after a
// restart the next renewal makes a new one.
type renewals struct {
	mu    sync.Mutex
	certs map[string]renewed
}

type renewed struct {
	uid  types.UID
	cert []byte
}

func (r *renewals) get(key string, uid types.UID) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.certs[key]; ok && c.uid == uid {
		return c.cert
	}
	return nil
}

func (r *renewals) put(key string, uid types.UID, cert []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.certs == nil {
		r.certs = map[string]renewed{}
	}
	r.certs[key] = renewed{uid, cert}
}

// GetCertificate implements rsyncv1.RsyncInternalServiceServer: the certificate the
// cluster's signer issued for the request, or a fresher one
// RenewCertificate had it issue since.
func (rb *readbacks) GetCertificate(ctx context.Context, req *rsyncv1.GetCertificateRequest) (*rsyncv1.GetCertificateResponse, error) {
	obj, err := rb.read(ctx, req.GetProvider(), req.GetCluster(), csrGVK, "", req.GetName())
	if err != nil {
		return nil, err
	}
	cert, err := issued(obj)
	if err != nil {
		return nil, err
	}
	if cert == nil {
		return nil, errs.FailedPrecondition("CertificateSigningRequest %q on %s/%s has no certificate yet", req.GetName(), req.GetProvider(), req.GetCluster())
	}
	if r := rb.renewed.get(store.Key(req.GetProvider(), req.GetCluster(), req.GetName()), obj.GetUID()); r != nil && !notAfter(r).Before(notAfter(cert)) {
		cert = r
	}
	return &rsyncv1.GetCertificateResponse{Certificate: cert}, nil
}

// RenewCertificate implements rsyncv1.RsyncInternalServiceServer. Only the owner of
// an issued request may renew it, and only that request's own spec is
// signed again: renewing never makes a new identity. The renewal request
// is deleted once read (deleting a request does not revoke what was
// issued); one left behind by a crash carries RenewsAnnotation.
func (rb *readbacks) RenewCertificate(ctx context.Context, req *rsyncv1.RenewCertificateRequest) (*rsyncv1.RenewCertificateResponse, error) {
	provider, cluster, name, owner := req.GetProvider(), req.GetCluster(), req.GetName(), req.GetOwner()
	base, err := rb.read(ctx, provider, cluster, csrGVK, "", name)
	if err != nil {
		return nil, err
	}
	if base.GetAnnotations()[engine.OwnerAnnotation] != owner {
		return nil, errs.FailedPrecondition("CertificateSigningRequest %q on cluster %s/%s is not %s's: it cannot renew it", name, provider, cluster, owner)
	}
	switch cert, err := issued(base); {
	case err != nil:
		return nil, err
	case cert == nil:
		return nil, errs.FailedPrecondition("CertificateSigningRequest %q on %s/%s has no certificate yet: nothing to renew", name, provider, cluster)
	}
	spec, _, _ := unstructured.NestedMap(base.Object, "spec")
	fresh := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
		"metadata": map[string]any{
			"name":        name + "." + suffix(),
			"labels":      toAny(base.GetLabels()),
			"annotations": map[string]any{engine.OwnerAnnotation: owner, RenewsAnnotation: name},
		},
		"spec": map[string]any{
			"request": spec["request"], "signerName": spec["signerName"], "usages": spec["usages"],
			"expirationSeconds": spec["expirationSeconds"],
		},
	}}
	if spec["expirationSeconds"] == nil {
		unstructured.RemoveNestedField(fresh.Object, "spec", "expirationSeconds")
	}
	kube, err := rb.connector.kube(ctx, provider, cluster)
	if err != nil {
		return nil, clusterError(ctx, provider, cluster, err)
	}
	created, err := kube.Create(ctx, fresh, engine.FieldManager(owner))
	if err != nil {
		return nil, clusterError(ctx, provider, cluster, err)
	}
	defer func() {
		if err := kube.Delete(context.WithoutCancel(ctx), csrGVK, "", created.GetName(), created.GetUID()); err != nil {
			rb.log.Warn("delete a renewal CertificateSigningRequest", zap.String("name", created.GetName()),
				zap.String("cluster", store.Key(provider, cluster)), zap.Error(err))
		}
	}()
	if err := kube.ApproveCSR(ctx, created, engine.FieldManager(owner)); err != nil {
		return nil, clusterError(ctx, provider, cluster, err)
	}
	cert, err := rb.awaitIssued(ctx, kube, created.GetName(), provider, cluster)
	if err != nil {
		return nil, err
	}
	rb.renewed.put(store.Key(provider, cluster, name), base.GetUID(), cert)
	return &rsyncv1.RenewCertificateResponse{Certificate: cert}, nil
}

// awaitIssued polls a request until its certificate is there.
func (rb *readbacks) awaitIssued(ctx context.Context, kube *engine.Kube, name, provider, cluster string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, renewWait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if obj, err := kube.Get(ctx, csrGVK, "", name); err == nil {
			switch cert, err := issued(obj); {
			case err != nil:
				return nil, err
			case cert != nil:
				return cert, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, errs.Unavailable(ctx.Err(), "cluster %s/%s: the signer issued no certificate within %s; retry later", provider, cluster, renewWait)
		case <-tick.C:
		}
	}
}

// issued reads the certificate of a request: nil while there is none yet,
// FailedPrecondition when the request was denied or failed.
func issued(csr *unstructured.Unstructured) ([]byte, error) {
	_, denied, b64 := engine.CSRState(csr)
	switch {
	case denied:
		return nil, errs.FailedPrecondition("CertificateSigningRequest %q was denied or failed", csr.GetName())
	case b64 == "":
		return nil, nil
	}
	cert, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errs.Internal(err, "CertificateSigningRequest %q: bad status.certificate", csr.GetName())
	}
	return cert, nil
}

// notAfter is the end of the first certificate in a PEM chain (zero if
// it does not parse).
func notAfter(chain []byte) time.Time {
	block, _ := pem.Decode(chain)
	if block == nil {
		return time.Time{}
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}
	}
	return c.NotAfter
}

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "r" + hex.EncodeToString(b[:])
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
