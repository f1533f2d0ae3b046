package rsync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"k8s.io/client-go/tools/clientcmd"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// kubeconfigSecret is the name of a cluster record's sealed kubeconfig.
const kubeconfigSecret = "kubeconfig"

// CreateCluster implements rsyncv1.RsyncServiceServer.
func (rg *registry) CreateCluster(ctx context.Context, req *rsyncv1.CreateClusterRequest) (*rsyncv1.CreateClusterResponse, error) {
	c := req.GetCluster()
	kc := c.GetSpec().GetKubeconfig()
	if kc == "" {
		return nil, errs.Invalid("cluster.spec.kubeconfig", "is required: the cluster's admin kubeconfig, as text")
	}
	server, err := checkKubeconfig(kc, c.GetSpec().GetAllowInsecure())
	if err != nil {
		return nil, err
	}
	if _, err := rg.providers.Get(ctx, req.GetProvider()); err != nil {
		return nil, err
	}
	stored := clusterRecord(c, statusOf(server, kc))
	id := store.Key(req.GetProvider(), c.GetMetadata().GetName())
	if err := rg.clusters.Create(ctx, id, req.GetProvider(), stored, store.Secret{Name: kubeconfigSecret, Value: []byte(kc)}); err != nil {
		return nil, err
	}
	rg.changes.changed()
	// Never probed yet: Unknown, as a GET answers now.
	return &rsyncv1.CreateClusterResponse{Cluster: withHealth(ctx, stored, rg.health.cfg.Shown(nil, time.Now()))}, nil
}

// GetCluster implements rsyncv1.RsyncServiceServer.
func (rg *registry) GetCluster(ctx context.Context, req *rsyncv1.GetClusterRequest) (*rsyncv1.GetClusterResponse, error) {
	c, err := rg.clusters.Get(ctx, store.Key(req.GetProvider(), req.GetName()))
	if err != nil {
		return nil, err
	}
	h, err := rg.health.one(ctx, req.GetProvider(), req.GetName())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.GetClusterResponse{Cluster: withHealth(ctx, shown(ctx, c.Msg), h)}, nil
}

// ListClusters implements rsyncv1.RsyncServiceServer. With a state
// filter, the pages of the registry are read until one holds clusters in
// that state (or is the last), so a page may hold fewer than page-size
// clusters; its next-page-token continues after the last cluster read.
func (rg *registry) ListClusters(ctx context.Context, req *rsyncv1.ListClustersRequest) (*rsyncv1.ListClustersResponse, error) {
	if err := checkState(req.GetState()); err != nil {
		return nil, err
	}
	if _, err := rg.providers.Get(ctx, req.GetProvider()); err != nil {
		return nil, err
	}
	page := store.PageOf(req)
	if l := req.GetLabel(); l != "" {
		page.Match = map[string]string{"spec.labels": l} // one of the labels
	}
	health, err := rg.health.under(ctx, []string{req.GetProvider()})
	if err != nil {
		return nil, err
	}
	var out []*rsyncv1.Cluster
	for {
		cs, next, err := rg.clusters.ListPage(ctx, req.GetProvider(), page)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			key := store.Key(req.GetProvider(), c.GetMetadata().GetName())
			if s := req.GetState(); s == "" || stateOf(health, key) == s {
				out = append(out, withHealth(ctx, shown(ctx, c), health[key]))
			}
		}
		if len(out) > 0 || next == "" {
			return &rsyncv1.ListClustersResponse{Clusters: out, NextPageToken: next}, nil
		}
		page.Token = next
	}
}

// UpdateCluster implements rsyncv1.RsyncServiceServer. The name is the
// record's identity: a body naming another cluster is refused.
func (rg *registry) UpdateCluster(ctx context.Context, req *rsyncv1.UpdateClusterRequest) (*rsyncv1.UpdateClusterResponse, error) {
	in := req.GetCluster()
	if n := in.GetMetadata().GetName(); n != req.GetName() {
		return nil, errs.Invalid("cluster.metadata.name", "must equal the cluster in the path (%q), got %q", req.GetName(), n)
	}
	kc := in.GetSpec().GetKubeconfig()
	server := ""
	if kc != "" {
		var err error
		if server, err = checkKubeconfig(kc, in.GetSpec().GetAllowInsecure()); err != nil {
			return nil, err
		}
	}
	id := store.Key(req.GetProvider(), req.GetName())
	cur, err := rg.clusters.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if kc == "" && cur.Msg.GetSpec().GetAllowInsecure() && !in.GetSpec().GetAllowInsecure() {
		// Turning the flag off keeps the stored kubeconfig: it must pass
		// without the flag.
		stored, err := rg.clusters.Secret(ctx, id, kubeconfigSecret)
		if err != nil {
			return nil, err
		}
		if _, err := checkKubeconfig(string(stored), false); err != nil {
			return nil, errs.Invalid("cluster.spec.allow-insecure", "cannot be turned off: the stored kubeconfig needs it (%s); send a kubeconfig that does not", errs.ToStatus(err).Message())
		}
	}
	next := clusterRecord(in, cur.Msg.GetStatus())
	var secrets []store.Secret
	if kc != "" {
		next.Status = statusOf(server, kc)
		secrets = append(secrets, store.Secret{Name: kubeconfigSecret, Value: []byte(kc)})
	}
	// Read before the write: a failed read leaves the cluster unchanged.
	h, err := rg.health.one(ctx, req.GetProvider(), req.GetName())
	if err != nil {
		return nil, err
	}
	if err := rg.clusters.Update(ctx, id, cur.Version, next, secrets...); err != nil {
		return nil, err
	}
	rg.changes.changed()
	return &rsyncv1.UpdateClusterResponse{Cluster: withHealth(ctx, next, h)}, nil
}

// DeleteCluster implements rsyncv1.RsyncServiceServer. A cluster that an
// owner holds (HoldCluster: a logical cloud's cluster reference) or that a
// live rollout targets is refused, naming the logical clouds; rsync
// decides from its own records and asks nobody. The cluster is marked
// first, so a hold added meanwhile either sees the mark (HoldCluster checks
// the cluster after storing the hold) or is seen here.
func (rg *registry) DeleteCluster(ctx context.Context, req *rsyncv1.DeleteClusterRequest) (*rsyncv1.DeleteClusterResponse, error) {
	id := store.Key(req.GetProvider(), req.GetName())
	if _, err := rg.clusters.MarkDeleting(ctx, id); err != nil {
		return nil, err
	}
	owners, err := rg.holders(ctx, req.GetProvider(), req.GetName())
	if err == nil && len(owners) > 0 {
		err = errs.Because(errs.ReasonReferenced, "cluster %q is referenced by logical clouds %s: remove those references first",
			id, strings.Join(owners, ", "))
	}
	if err != nil {
		if uerr := rg.clusters.Unmark(context.WithoutCancel(ctx), id); uerr != nil {
			return nil, errors.Join(err, uerr)
		}
		return nil, err
	}
	if err := rg.clusters.Delete(ctx, id); err != nil {
		return nil, err
	}
	if err := rg.health.records.Delete(ctx, id); err != nil && errs.Code(err) != codes.NotFound {
		return nil, err
	}
	rg.changes.changed()
	return &rsyncv1.DeleteClusterResponse{}, nil
}

// SelectClusters implements rsyncv1.RsyncInternalServiceServer.
func (rg *registry) SelectClusters(ctx context.Context, req *rsyncv1.SelectClustersRequest) (*rsyncv1.SelectClustersResponse, error) {
	providers, err := rg.providers.List(ctx, "")
	if err != nil {
		return nil, err
	}
	out := &rsyncv1.SelectClustersResponse{}
	for _, p := range providers {
		cs, err := rg.clusters.List(ctx, p.GetMetadata().GetName())
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			if !slices.ContainsFunc(req.GetLabels(), func(l string) bool { return !slices.Contains(c.GetSpec().GetLabels(), l) }) {
				out.Clusters = append(out.Clusters, &rsyncv1.SelectedCluster{Provider: p.GetMetadata().GetName(), Name: c.GetMetadata().GetName()})
			}
		}
	}
	return out, nil
}

// shown is c as the caller may read it. Its status (the API server's URL
// and the kubeconfig's fingerprint) says where a cluster's API server is
// and when its admin credential changed: an operator's view, shown to
// admins and to DCM's services acting on their own. A tenant
// (project-admin, reader) picks clusters by name and labels and gets no
// status; the gateway forwards who the REST caller is (server.Caller).
func shown(ctx context.Context, c *rsyncv1.Cluster) *rsyncv1.Cluster {
	if r := server.Caller(ctx).Role; r == pki.RoleAdmin || r == pki.RoleService || c.GetStatus() == nil {
		return c
	}
	out, _ := proto.Clone(c).(*rsyncv1.Cluster)
	out.Status = nil
	return out
}

// clusterRecord is the stored (and answered) form of c: its kubeconfig
// left out, status in its place.
func clusterRecord(c *rsyncv1.Cluster, status *rsyncv1.ClusterStatus) *rsyncv1.Cluster {
	return &rsyncv1.Cluster{
		Metadata: c.GetMetadata(),
		Spec:     &rsyncv1.ClusterSpec{Labels: c.GetSpec().GetLabels(), AllowInsecure: c.GetSpec().GetAllowInsecure()},
		Status:   status,
	}
}

// statusOf shows a kubeconfig by its server URL and fingerprint.
func statusOf(server, kubeconfig string) *rsyncv1.ClusterStatus {
	sum := sha256.Sum256([]byte(kubeconfig))
	return &rsyncv1.ClusterStatus{Server: server, KubeconfigFingerprint: "sha256:" + hex.EncodeToString(sum[:])}
}

// checkKubeconfig parses a kubeconfig and returns its current context's
// server URL. Every credential must be inline: a path on this host, an
// exec plugin or an auth provider is refused (the registry must not read
// its own files or run commands a kubeconfig names). Messages never quote
// the kubeconfig. Its endpoints are checked by checkEndpoints, without
// dialing or resolving anything.
func checkKubeconfig(text string, allowInsecure bool) (string, error) {
	const field = "cluster.spec.kubeconfig"
	cfg, err := clientcmd.Load([]byte(text))
	if err != nil {
		return "", errs.Invalid(field, "is not a kubeconfig (YAML or JSON)")
	}
	if cfg.CurrentContext == "" {
		return "", errs.Invalid(field, "has no current-context")
	}
	ctxt, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return "", errs.Invalid(field, "current-context %q is not among its contexts", cfg.CurrentContext)
	}
	cl, ok := cfg.Clusters[ctxt.Cluster]
	if !ok {
		return "", errs.Invalid(field, "cluster %q of the current context is not among its clusters", ctxt.Cluster)
	}
	user, ok := cfg.AuthInfos[ctxt.AuthInfo]
	if !ok {
		return "", errs.Invalid(field, "user %q of the current context is not among its users", ctxt.AuthInfo)
	}
	switch {
	case cl.CertificateAuthority != "":
		return "", errs.Invalid(field, "certificate-authority names a file: give certificate-authority-data")
	case user.ClientCertificate != "" || user.ClientKey != "":
		return "", errs.Invalid(field, "client-certificate/client-key name files: give the -data fields")
	case user.TokenFile != "":
		return "", errs.Invalid(field, "tokenFile names a file: give token")
	case user.Exec != nil || user.AuthProvider != nil:
		return "", errs.Invalid(field, "exec plugins and auth providers are not accepted: give inline credentials")
	}
	if err := checkEndpoints(cl, allowInsecure); err != nil {
		return "", err
	}
	if _, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig(); err != nil {
		return "", errs.Invalid(field, "%s", fmt.Sprint(err))
	}
	return cl.Server, nil
}
