package rsync_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"go.uber.org/zap"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
	"github.com/dcm-project/dcm/services/rsync/internal/rsync"
)

// kubeconfig is an admin kubeconfig with inline credentials; user is the
// YAML of its user entry, so tests can swap in other kinds of credential.
func kubeconfig(t *testing.T, server, user string) string {
	t.Helper()
	ca, err := pki.NewCA("cluster", time.Hour)
	require.NoError(t, err)
	c, k, err := ca.Issue(pki.Request{Identity: pki.Identity{Subject: "admin", Role: "system:masters"}, Client: true, NotAfter: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	b64 := base64.StdEncoding.EncodeToString
	if user == "" {
		user = fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}", b64(c), b64(k))
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: edge
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: admin
  user: %s
contexts:
- name: ctx
  context: {cluster: edge, user: admin}
current-context: ctx
`, server, b64(pki.CertPEM(ca.Cert.Raw)), user)
}

func TestClusters(t *testing.T) {
	t.Parallel()
	c := newClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		return []server.Service{rsync.New(st, engine.Config{}, zap.NewNop())}
	}))
	ctx := context.Background()
	_, err := c.CreateClusterProvider(ctx, &rsyncv1.CreateClusterProviderRequest{
		ClusterProvider: &rsyncv1.ClusterProvider{Metadata: &typesv1.Metadata{Name: "edge"}}})
	require.NoError(t, err)
	create := func(provider, name, kc string, labels ...string) (*rsyncv1.Cluster, error) {
		r, err := c.CreateCluster(ctx, &rsyncv1.CreateClusterRequest{Provider: provider, Cluster: &rsyncv1.Cluster{
			Metadata: &typesv1.Metadata{Name: name}, Spec: &rsyncv1.ClusterSpec{Kubeconfig: kc, Labels: labels}}})
		return r.GetCluster(), err
	}
	kc := kubeconfig(t, "https://10.1.0.1:6443", "")
	got, err := create("edge", "c1", kc, "edge", "sriov")
	require.NoError(t, err)
	require.Empty(t, got.GetSpec().GetKubeconfig(), "never answered")
	require.Equal(t, "https://10.1.0.1:6443", got.GetStatus().GetServer())
	require.True(t, strings.HasPrefix(got.GetStatus().GetKubeconfigFingerprint(), "sha256:"))
	_, err = create("edge", "c2", kubeconfig(t, "https://10.1.0.2:6443", ""), "edge")
	require.NoError(t, err)
	_, err = create("edge", "c1", kc)
	require.Equal(t, codes.AlreadyExists, status.Code(err))
	_, err = create("missing", "c9", kc)
	require.Equal(t, codes.NotFound, status.Code(err), "a cluster of a missing provider")

	bad := map[string]struct{ kc, field string }{
		"empty":               {"", "spec.kubeconfig"},
		"not yaml":            {"{{{", "spec.kubeconfig"},
		"no current context":  {strings.Replace(kc, "current-context: ctx", "", 1), "spec.kubeconfig"},
		"unknown context":     {strings.Replace(kc, "current-context: ctx", "current-context: other", 1), "spec.kubeconfig"},
		"no server":           {kubeconfig(t, "", ""), "spec.kubeconfig"},
		"CA from a file":      {strings.Replace(kc, "certificate-authority-data:", "certificate-authority: /etc/ca.crt, x:", 1), "spec.kubeconfig"},
		"client cert in file": {kubeconfig(t, "https://h:6443", "{client-certificate: /c.crt, client-key: /c.key}"), "spec.kubeconfig"},
		"token file":          {kubeconfig(t, "https://h:6443", "{tokenFile: /t}"), "spec.kubeconfig"},
		"exec plugin":         {kubeconfig(t, "https://h:6443", "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}}"), "spec.kubeconfig"},
	}
	for name, b := range bad {
		_, err := create("edge", "bad", b.kc)
		require.Equal(t, codes.InvalidArgument, status.Code(err), name)
		require.Equal(t, "cluster."+b.field, errs.FieldOf(status.Convert(err)), name)
		require.NotContains(t, err.Error(), "LS0t", "%s: the error quotes no credential", name)
	}
	_, err = create("edge", "bad", kc, "not a label")
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	_, err = c.GetCluster(ctx, &rsyncv1.GetClusterRequest{Provider: "edge", Name: "bad"})
	require.Equal(t, codes.NotFound, status.Code(err), "nothing stored by refused requests")

	list, err := c.ListClusters(ctx, &rsyncv1.ListClustersRequest{Provider: "edge", Label: "sriov"})
	require.NoError(t, err)
	require.Len(t, list.GetClusters(), 1)
	require.Equal(t, "c1", list.GetClusters()[0].GetMetadata().GetName())
	list, err = c.ListClusters(ctx, &rsyncv1.ListClustersRequest{Provider: "edge"})
	require.NoError(t, err)
	require.Len(t, list.GetClusters(), 2)

	// Update labels only: the kubeconfig and what it shows are kept.
	up, err := c.UpdateCluster(ctx, &rsyncv1.UpdateClusterRequest{Provider: "edge", Name: "c1", Cluster: &rsyncv1.Cluster{
		Metadata: &typesv1.Metadata{Name: "c1", Description: "moved"}, Spec: &rsyncv1.ClusterSpec{Labels: []string{"core"}}}})
	require.NoError(t, err)
	require.Equal(t, got.GetStatus().GetKubeconfigFingerprint(), up.GetCluster().GetStatus().GetKubeconfigFingerprint())
	require.Equal(t, []string{"core"}, up.GetCluster().GetSpec().GetLabels())
	// A new kubeconfig changes the server and fingerprint.
	up, err = c.UpdateCluster(ctx, &rsyncv1.UpdateClusterRequest{Provider: "edge", Name: "c1", Cluster: &rsyncv1.Cluster{
		Metadata: &typesv1.Metadata{Name: "c1"}, Spec: &rsyncv1.ClusterSpec{Kubeconfig: kubeconfig(t, "https://10.9.9.9:6443", "")}}})
	require.NoError(t, err)
	require.Equal(t, "https://10.9.9.9:6443", up.GetCluster().GetStatus().GetServer())
	require.NotEqual(t, got.GetStatus().GetKubeconfigFingerprint(), up.GetCluster().GetStatus().GetKubeconfigFingerprint())
	_, err = c.UpdateCluster(ctx, &rsyncv1.UpdateClusterRequest{Provider: "edge", Name: "c1", Cluster: &rsyncv1.Cluster{Metadata: &typesv1.Metadata{Name: "c2"}}})
	require.Equal(t, codes.InvalidArgument, status.Code(err))

	_, err = c.DeleteClusterProvider(ctx, &rsyncv1.DeleteClusterProviderRequest{Name: "edge"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "a provider with clusters stays")
	for _, n := range []string{"c1", "c2"} {
		_, err = c.DeleteCluster(ctx, &rsyncv1.DeleteClusterRequest{Provider: "edge", Name: n})
		require.NoError(t, err)
	}
	_, err = c.DeleteClusterProvider(ctx, &rsyncv1.DeleteClusterProviderRequest{Name: "edge"})
	require.NoError(t, err)
}
