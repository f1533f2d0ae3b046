package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/yaml"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/store"
)

// A mesh logical cloud on several clusters has an istiod on each, and each
// discovers its own cluster's endpoints only, unless it holds a remote
// secret of every other cluster: a kubeconfig of that cluster, in a Secret
// of its istio namespace labelled istio/multiCluster=true (what `istioctl
// create-remote-secret` writes; docs/mesh.md "Across clusters"). The
// kubeconfig's credential is a token of the other cluster's
// istio-reader-service-account, which the service mesh service renders
// with its read-only ClusterRole. Only rsync can get that token and the
// cluster's address, and only once the ServiceAccount is applied, so the
// remote secrets are not part of the logical cloud's rollout: MeshPeers
// gives them, in a rollout of their own (owner meshpeers/<project>/<lc>,
// its Secrets in the logical cloud's istio namespaces: host owner the
// logical cloud's rollout), every DCM_MESH_PEERS_INTERVAL, to every
// Instantiated mesh logical cloud with readers applied on two clusters or
// more (while one is not applied yet, as during an update, what was given
// stays). A replica makes new tokens when the clusters (their readers,
// servers, CAs) change and at half a token's life; an update that leaves
// one cluster, terminate, and an update that turns the mesh off delete the
// rollout.

// peersTokenLifetime is the life of the tokens in the remote secrets; they
// are renewed at half of it.
const peersTokenLifetime = 24 * time.Hour

// readerServiceAccount is the ServiceAccount another cluster's istiod reads
// a cluster as (the service mesh service renders it and its ClusterRole).
const readerServiceAccount = "istio-reader-service-account"

// meshPeersOwner is the resource synchronizer's owner id of a logical
// cloud's remote secrets.
func meshPeersOwner(project, lc string) string { return "meshpeers/" + project + "/" + lc }

// MeshPeers gives the clusters of mesh logical clouds each other's remote
// secrets.
type MeshPeers struct {
	*cloudReader
	*rollouts
	locks *keyLocks
	log   *zap.Logger
	now   func() time.Time

	mu sync.Mutex
	// given is what this replica last submitted, by owner.
	given map[string]peersGiven
}

// peersGiven is a submit of remote secrets: the fingerprint of the
// clusters it was made for, and when its tokens were made.
type peersGiven struct {
	fingerprint string
	at          time.Time
}

// meshReader is a cluster whose reader ServiceAccount the logical cloud's
// rollout has applied, with what a kubeconfig of it needs.
type meshReader struct {
	provider, cluster, namespace string
	conn                         *rsyncv1.GetClusterConnectionResponse
}

// Reconcile gives the remote secrets on start and then every interval
// until ctx ends.
func (s *MeshPeers) Reconcile(interval time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		if interval <= 0 {
			interval = 30 * time.Second
		}
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if err := s.ReconcileMeshPeers(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("give mesh logical clouds their remote secrets; will retry", zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}

// ReconcileMeshPeers is one round of Reconcile.
func (s *MeshPeers) ReconcileMeshPeers(ctx context.Context) error {
	all, err := s.clouds.Match(ctx, nil)
	if err != nil {
		return err
	}
	var failed []error
	for _, it := range all {
		project, lc, ok := strings.Cut(it.ID, "/")
		if !ok || it.Deleting || !peered(it.Msg) {
			continue
		}
		if err := s.peer(ctx, project, lc); err != nil {
			if st, ok := status.FromError(err); ok && errs.ReasonOf(st) == errs.ReasonConcurrentUpdate {
				continue // another replica holds its lock: the next round
			}
			failed = append(failed, fmt.Errorf("logical cloud %s: %w", it.ID, err))
		}
	}
	return errors.Join(failed...)
}

// peered reports whether logical cloud c is one whose clusters get remote
// secrets: its mesh enabled, and applied.
func peered(c *corev1.LogicalCloud) bool {
	return c.GetSpec().GetServiceMesh().GetEnabled() && c.GetSpec().GetLevel() != levelAdmin &&
		c.GetLifecycle().GetPhase() == phaseApplying
}

// peer submits or updates the remote secrets of logical cloud lc of
// project when its clusters changed or its tokens are half through their
// life.
func (s *MeshPeers) peer(ctx context.Context, project, lc string) error {
	listed, readers, err := s.readers(ctx, project, lc)
	if err != nil {
		return err
	}
	owner := meshPeersOwner(project, lc)
	if listed < 2 {
		// Nothing to peer (any more: an update left one cluster).
		s.forget(owner)
		return s.deletePeers(ctx, project, lc, false)
	}
	if len(readers) < listed {
		// A reader not applied yet (a first apply, or an update under
		// way): what was given stays until every one is.
		return nil
	}
	fp := fingerprint(readers)
	s.mu.Lock()
	last, ok := s.given[owner]
	s.mu.Unlock()
	if ok && last.fingerprint == fp && s.now().Sub(last.at) < peersTokenLifetime/2 {
		// Given, unless the rollout was deleted since (a terminate and a
		// new apply, or another replica's round).
		st, err := s.rsync.GetRolloutStatus(ctx, &rsyncv1.GetRolloutStatusRequest{Owner: owner})
		if err == nil && !st.GetStatus().GetDeleting() {
			return nil
		}
		if err != nil && errs.Code(err) != codes.NotFound {
			return err
		}
	}
	at := s.now()
	clusters, err := s.remoteSecrets(ctx, project, lc, readers)
	if err != nil {
		return err
	}
	// Under the logical cloud's transition lock, and only while it is
	// still applied: a terminate or an update that turns its mesh off
	// deletes this rollout under the same lock.
	lctx, unlock, err := s.locks.lock(ctx, store.Key(project, lc), fmt.Sprintf("logical cloud %q", lc))
	if err != nil {
		return err
	}
	defer unlock()
	c, err := s.clouds.Get(lctx, store.Key(project, lc))
	if errs.Code(err) == codes.NotFound {
		return nil // deleted meanwhile
	}
	if err != nil {
		return err
	}
	if !peered(c.Msg) {
		return nil
	}
	if _, err := s.submitStaged(lctx, owner, rolloutOwner(project, lc), nil, clusters, ok); err != nil {
		return err
	}
	s.mu.Lock()
	s.given[owner] = peersGiven{fingerprint: fp, at: at}
	s.mu.Unlock()
	s.log.Info("gave a mesh logical cloud's clusters their remote secrets", zap.String("logical_cloud", store.Key(project, lc)),
		zap.Int("clusters", len(readers)))
	return nil
}

// forget drops what this replica gave owner.
func (s *MeshPeers) forget(owner string) {
	s.mu.Lock()
	delete(s.given, owner)
	s.mu.Unlock()
}

// readers are the clusters of logical cloud lc whose reader ServiceAccount
// its rollout has applied, in the rollout's cluster order; listed counts
// the clusters where the rollout applies one, in whatever state.
func (s *MeshPeers) readers(ctx context.Context, project, lc string) (listed int, out []meshReader, err error) {
	st, err := s.rsync.GetRolloutStatus(ctx, &rsyncv1.GetRolloutStatusRequest{Owner: rolloutOwner(project, lc)})
	if errs.Code(err) == codes.NotFound {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	if st.GetStatus().GetDeleting() {
		return 0, nil, nil
	}
	for _, cl := range st.GetStatus().GetClusters() {
		for _, r := range cl.GetResources() {
			if r.GetKind() != "ServiceAccount" || r.GetApiVersion() != "v1" || r.GetName() != readerServiceAccount ||
				r.GetOperation() != rsyncv1.Operation_OPERATION_APPLY {
				continue
			}
			listed++
			if r.GetState() != rsyncv1.State_STATE_APPLIED {
				continue
			}
			conn, err := s.rsync.GetClusterConnection(ctx, &rsyncv1.GetClusterConnectionRequest{Provider: cl.GetProvider(), Cluster: cl.GetCluster()})
			if err != nil {
				return 0, nil, err
			}
			out = append(out, meshReader{provider: cl.GetProvider(), cluster: cl.GetCluster(), namespace: r.GetNamespace(), conn: conn})
		}
	}
	return listed, out, nil
}

// fingerprint identifies what remote secrets of readers would say but for
// their tokens.
func fingerprint(readers []meshReader) string {
	h := sha256.New()
	for _, r := range readers {
		_, _ = fmt.Fprintf(h, "%q %q %q %q %q %x\n", r.provider, r.cluster, r.namespace,
			r.conn.GetServer(), r.conn.GetTlsServerName(), r.conn.GetCertificateAuthorityData())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// remoteSecrets are, for each cluster of readers, a remote secret of each
// other cluster in its istio namespace, with a fresh token of that
// cluster's reader.
func (s *MeshPeers) remoteSecrets(ctx context.Context, project, lc string, readers []meshReader) ([]*rsyncv1.ClusterResources, error) {
	configs := make([][]byte, len(readers))
	for i, r := range readers {
		tok, err := s.rsync.GetServiceAccountToken(ctx, &rsyncv1.GetServiceAccountTokenRequest{
			Provider: r.provider, Cluster: r.cluster, Namespace: r.namespace, ServiceAccount: readerServiceAccount,
			ExpirationSeconds: int64(peersTokenLifetime / time.Second)})
		if err != nil {
			return nil, err
		}
		if configs[i], err = readerKubeconfig(r, string(tok.GetToken())); err != nil {
			return nil, err
		}
	}
	var out []*rsyncv1.ClusterResources
	for i, a := range readers {
		cr := &rsyncv1.ClusterResources{Provider: a.provider, Cluster: a.cluster}
		for j, b := range readers {
			if i == j {
				continue
			}
			m, err := remoteSecret(project, lc, a.namespace, kube.MeshClusterID(b.provider, b.cluster), configs[j])
			if err != nil {
				return nil, err
			}
			cr.Resources = append(cr.Resources, &rsyncv1.Resource{Manifest: m, Sensitive: true})
		}
		out = append(out, cr)
	}
	return out, nil
}

// readerKubeconfig is a kubeconfig of reader r's cluster with token.
func readerKubeconfig(r meshReader, token string) ([]byte, error) {
	id := kube.MeshClusterID(r.provider, r.cluster)
	out, err := yaml.Marshal(kubeconfig{
		APIVersion: "v1", Kind: "Config", CurrentContext: id,
		Clusters: []namedCluster{{Name: id, Cluster: kubeconfigCluster{Server: r.conn.GetServer(),
			CertificateAuthorityData: r.conn.GetCertificateAuthorityData(), TLSServerName: r.conn.GetTlsServerName()}}},
		Users:    []namedUser{{Name: id, User: kubeconfigUser{Token: token}}},
		Contexts: []namedContext{{Name: id, Context: kubeconfigContext{Cluster: id, User: id}}},
	})
	if err != nil {
		return nil, errs.Internal(err, "write a remote secret's kubeconfig")
	}
	return out, nil
}

// remoteSecret is the manifest of the remote secret of cluster id in
// namespace ns (Istio's pkg/kube/multicluster: the label selects it, the
// data key is the cluster's id, its value a kubeconfig).
func remoteSecret(project, lc, ns, id string, config []byte) (string, error) {
	labels := map[string]string{"istio/multiCluster": "true"}
	for k, v := range kube.Labels(project, lc) {
		labels[k] = v
	}
	b, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": "istio-remote-secret-" + id, "namespace": ns, "labels": labels,
			"annotations": map[string]string{"networking.istio.io/cluster": id}},
		"type": "Opaque",
		"data": map[string][]byte{id: config},
	})
	if err != nil {
		return "", errs.Internal(err, "write a remote secret")
	}
	return string(b), nil
}

// deletePeers deletes logical cloud lc's remote secrets (terminate, a mesh
// turned off, one cluster left); none is no error. force settles the
// deletion at once, as a forced terminate does the logical cloud's.
func (s *rollouts) deletePeers(ctx context.Context, project, lc string, force bool) error {
	_, err := s.rsync.DeleteRollout(ctx, &rsyncv1.DeleteRolloutRequest{Owner: meshPeersOwner(project, lc), Force: force})
	if errs.Code(err) == codes.NotFound {
		return nil
	}
	return err
}
