package rsync

// Read-backs: what core reads of a cluster (certificates are in
// certificates.go). Each names the cluster object it reads, maps the
// cluster's answer to a gRPC code, and never quotes a credential.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/logging"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

var (
	csrGVK            = schema.GroupVersionKind{Group: "certificates.k8s.io", Version: "v1", Kind: "CertificateSigningRequest"}
	quotaGVK          = schema.GroupVersionKind{Version: "v1", Kind: "ResourceQuota"}
	serviceAccountGVK = schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}
)

// Token lifetimes: the default, and the bounds a request must stay in.
const (
	defaultTokenLifetime = 24 * time.Hour
	minTokenLifetime     = 10 * time.Minute
	maxTokenLifetime     = 30 * 24 * time.Hour
)

// GetResourceQuotaStatus implements rsyncv1.RsyncInternalServiceServer.
func (rb *readbacks) GetResourceQuotaStatus(ctx context.Context, req *rsyncv1.GetResourceQuotaStatusRequest) (*rsyncv1.GetResourceQuotaStatusResponse, error) {
	obj, err := rb.read(ctx, req.GetProvider(), req.GetCluster(), quotaGVK, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, err
	}
	var q corev1.ResourceQuota
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &q); err != nil {
		return nil, errs.Internal(err, "ResourceQuota %s/%s: unreadable", req.GetNamespace(), req.GetName())
	}
	return &rsyncv1.GetResourceQuotaStatusResponse{Hard: quantities(q.Status.Hard), Used: quantities(q.Status.Used)}, nil
}

// The traffic controller's program name and the owner ids of its rollouts
// (core's trafficOwner).
const (
	trafficProgram     = "traffic"
	trafficOwnerPrefix = "traffic/"
)

// tokenAllowed refuses the traffic controller (program peer) a token of
// a ServiceAccount its own rollouts did not apply (owner): it reads its DNS
// records with those, never with a logical cloud's users.
func tokenAllowed(peer, owner, where string) error {
	if peer == trafficProgram && !strings.HasPrefix(owner, trafficOwnerPrefix) {
		return errs.Forbidden("service-account", "%s belongs to no traffic intent group: the traffic controller gets tokens of its own ServiceAccounts only", where)
	}
	return nil
}

// GetServiceAccountToken implements rsyncv1.RsyncInternalServiceServer: a bound
// token from the cluster's TokenRequest API. Only a ServiceAccount DCM
// applied (its dcm.io/owner annotation, or rsync's record) gets one: this
// is no way to act as a cluster's own ServiceAccounts. The token is a
// credential: it is never logged, nor quoted in an error.
func (rb *readbacks) GetServiceAccountToken(ctx context.Context, req *rsyncv1.GetServiceAccountTokenRequest) (*rsyncv1.GetServiceAccountTokenResponse, error) {
	lifetime := time.Duration(req.GetExpirationSeconds()) * time.Second
	switch {
	case lifetime == 0:
		lifetime = defaultTokenLifetime
	case lifetime < minTokenLifetime || lifetime > maxTokenLifetime:
		// The request's rules say the same; this guards other callers.
		return nil, errs.Invalid("expirationSeconds", "must be 0 (24 hours) or from 600 (10 minutes) to 2592000 (30 days), got %d", req.GetExpirationSeconds())
	}
	provider, cluster, ns, name := req.GetProvider(), req.GetCluster(), req.GetNamespace(), req.GetServiceAccount()
	sa, err := rb.read(ctx, provider, cluster, serviceAccountGVK, ns, name)
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("ServiceAccount %s/%s on cluster %s/%s", ns, name, provider, cluster)
	owner := sa.GetAnnotations()[engine.OwnerAnnotation]
	if owner == "" {
		owner = rb.engine.ManagedBy(provider, cluster, "v1", "ServiceAccount", ns, name)
	}
	if owner == "" {
		return nil, errs.FailedPrecondition("%s is not managed by DCM: no token is issued for it", where)
	}
	if err := tokenAllowed(server.Peer(ctx).Subject, owner, where); err != nil {
		return nil, err
	}
	kube, err := rb.connector.kube(ctx, provider, cluster)
	if err != nil {
		return nil, clusterError(ctx, provider, cluster, err)
	}
	token, exp, err := kube.RequestToken(ctx, ns, name, int64(lifetime/time.Second))
	switch {
	case apierrors.IsNotFound(err):
		return nil, errs.NotFound("%s not found", where)
	case err != nil:
		return nil, clusterError(ctx, provider, cluster, err)
	}
	return &rsyncv1.GetServiceAccountTokenResponse{Token: []byte(token), ExpireTime: timestamppb.New(exp)}, nil
}

// GetObjectOwners implements rsyncv1.RsyncInternalServiceServer.
func (rb *readbacks) GetObjectOwners(ctx context.Context, req *rsyncv1.GetObjectOwnersRequest) (*rsyncv1.GetObjectOwnersResponse, error) {
	out, err := rb.engine.ObjectOwners(ctx, req.GetOwner(), req.GetApiVersion(), req.GetKind(), req.GetNamespace(), req.GetName(), req.GetClusters())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.GetObjectOwnersResponse{Clusters: out}, nil
}

func quantities(list corev1.ResourceList) []*rsyncv1.ResourceQuantity {
	out := make([]*rsyncv1.ResourceQuantity, 0, len(list))
	for name, q := range list {
		out = append(out, &rsyncv1.ResourceQuantity{Resource: string(name), Quantity: q.String()})
	}
	slices.SortFunc(out, func(a, b *rsyncv1.ResourceQuantity) int { return strings.Compare(a.GetResource(), b.GetResource()) })
	return out
}

// read gets one object from a registered cluster, mapping the cluster's
// answer to a gRPC code: missing is NotFound, unreachable is Unavailable.
func (rb *readbacks) read(ctx context.Context, provider, cluster string, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	cl, err := rb.connector.Connect(ctx, provider, cluster)
	if err != nil {
		if kerr := rb.connector.Known(ctx, provider, cluster); errs.Code(kerr) == codes.NotFound {
			return nil, errs.NotFound("cluster %s/%s not found", provider, cluster)
		}
		return nil, err
	}
	obj, err := cl.Get(ctx, gvk, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, errs.NotFound("%s %q not found on cluster %s/%s", gvk.Kind, strings.TrimPrefix(namespace+"/"+name, "/"), provider, cluster)
	case err != nil:
		return nil, clusterError(ctx, provider, cluster, err)
	}
	return obj, nil
}

// clusterError maps a cluster's error to a gRPC code: unreachable is
// Unavailable, a refusal FailedPrecondition. The caller is told the cluster
// and the short cause (engine.Cause), never the client's error with the
// API server's address; the full error goes to the request's log.
func clusterError(ctx context.Context, provider, cluster string, err error) error {
	if engine.Retryable(err) {
		// The interceptor logs an Unavailable error with its cause.
		return errs.Unavailable(err, "cluster %s/%s: %s", provider, cluster, engine.Cause(err))
	}
	logging.From(ctx).Info("cluster refused", zap.String("cluster", provider+"/"+cluster), zap.Error(err))
	return errs.FailedPrecondition("cluster %s/%s: %s", provider, cluster, engine.Cause(err))
}

// GetClusterConnection implements rsyncv1.RsyncInternalServiceServer: the server
// and CA of the kubeconfig's current context, never its credentials.
func (rb *readbacks) GetClusterConnection(ctx context.Context, req *rsyncv1.GetClusterConnectionRequest) (*rsyncv1.GetClusterConnectionResponse, error) {
	kc, err := rb.kubeconfig(ctx, req.GetProvider(), req.GetCluster())
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc)
	if err != nil {
		return nil, errs.Internal(err, "cluster %s/%s: stored kubeconfig is unreadable", req.GetProvider(), req.GetCluster())
	}
	return &rsyncv1.GetClusterConnectionResponse{
		Server: cfg.Host, CertificateAuthorityData: cfg.CAData, TlsServerName: cfg.ServerName,
	}, nil
}

// kubeconfig reads a registered cluster's sealed kubeconfig.
func (rb *readbacks) kubeconfig(ctx context.Context, provider, cluster string) ([]byte, error) {
	id := store.Key(provider, cluster)
	if _, err := rb.clusters.Get(ctx, id); err != nil {
		return nil, err
	}
	return rb.clusters.Secret(ctx, id, kubeconfigSecret)
}
