package rsync_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
	"github.com/dcm-project/dcm/services/rsync/internal/rsync"
)

// probeInterval is the tests' probe interval.
const probeInterval = 2 * time.Second

// serveProbing serves the rsync API with its engine and the cluster
// probes running every probeInterval.
func serveProbing(t *testing.T) client {
	t.Helper()
	return serveWithEngine(t, func(s *rsync.Service) {
		s.ProbeClusters(engine.HealthConfig{Interval: probeInterval}, zap.NewNop())
	})
}

// withUser is the kubeconfig of kc's API server (its CA) with user as its
// user entry.
func withUser(kc *kubetest.Cluster, user string) string {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: u
  user: %s
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`, kc.Server, b64(pki.CertPEM(kc.CA.Cert.Raw)), user)
}

// waitState polls the cluster until its status.state is want, within
// limit; it returns the cluster as then shown.
func waitState(t *testing.T, c client, name, want string, limit time.Duration) *rsyncv1.Cluster {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		r, err := c.GetCluster(context.Background(), &rsyncv1.GetClusterRequest{Provider: "edge", Name: name})
		require.NoError(t, err)
		if r.GetCluster().GetStatus().GetState() == want {
			return r.GetCluster()
		}
		require.True(t, time.Now().Before(deadline), "cluster %s: state %q, not %s, after %s: %v", name, r.GetCluster().GetStatus().GetState(), want, limit, r.GetCluster().GetStatus())
		time.Sleep(50 * time.Millisecond) // poll interval, not a wait for an outcome
	}
}

// TestClusterHealthOnRealClusters probes real API servers: Ready with its
// version, Unreachable within two probe intervals of its API server
// stopping, Ready again once it restarts; a kubeconfig whose token or
// client certificate the API server does not accept shows Unauthorized.
// A rollout to the stopped cluster names it Unreachable. The list
// filters by state; an unknown state is refused naming the field. Not
// parallel: it stops a shared cluster's API server (restarted before it
// returns).
func TestClusterHealthOnRealClusters(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	c := serveProbing(t)
	ctx := context.Background()
	_, err := c.CreateClusterProvider(ctx, &rsyncv1.CreateClusterProviderRequest{
		ClusterProvider: &rsyncv1.ClusterProvider{Metadata: &typesv1.Metadata{Name: "edge"}}})
	require.NoError(t, err)
	kc := h.Clusters[0]
	other, err := pki.NewCA("other", time.Hour)
	require.NoError(t, err)
	cert, key, err := other.Issue(pki.Request{Identity: pki.Identity{Subject: "admin", Role: "system:masters"}, Client: true, NotAfter: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	b64 := base64.StdEncoding.EncodeToString
	for name, kubeconfig := range map[string]string{
		"alive":     string(kc.Kubeconfig),
		"bad-token": withUser(kc, `{token: not-a-token-the-server-knows}`),
		"bad-cert":  withUser(kc, fmt.Sprintf("{client-certificate-data: %s, client-key-data: %s}", b64(cert), b64(key))),
	} {
		_, err := c.CreateCluster(ctx, &rsyncv1.CreateClusterRequest{Provider: "edge", Cluster: &rsyncv1.Cluster{
			Metadata: &typesv1.Metadata{Name: name}, Spec: &rsyncv1.ClusterSpec{Kubeconfig: kubeconfig}}})
		require.NoError(t, err)
	}
	// Before its first probe a cluster is Unknown; the first probe comes
	// within half an interval of the registry read.
	ready := waitState(t, c, "alive", engine.HealthReady, 4*probeInterval)
	st := ready.GetStatus()
	require.NotEmpty(t, st.GetServerVersion(), "%v", st)
	require.NotNil(t, st.GetSince())
	require.NotNil(t, st.GetLastSeen())
	for _, name := range []string{"bad-token", "bad-cert"} {
		bad := waitState(t, c, name, engine.HealthUnauthorized, 4*probeInterval)
		require.Contains(t, bad.GetStatus().GetLastError(), "credentials", "%v", bad.GetStatus())
		require.Nil(t, bad.GetStatus().GetLastSeen(), "never seen")
	}

	list := func(state string) []string {
		t.Helper()
		r, err := c.ListClusters(ctx, &rsyncv1.ListClustersRequest{Provider: "edge", State: state})
		require.NoError(t, err)
		var out []string
		for _, cl := range r.GetClusters() {
			require.Equal(t, state, cl.GetStatus().GetState())
			out = append(out, cl.GetMetadata().GetName())
		}
		return out
	}
	require.Equal(t, []string{"alive"}, list(engine.HealthReady))
	require.Equal(t, []string{"bad-cert", "bad-token"}, list(engine.HealthUnauthorized))
	require.Empty(t, list(engine.HealthUnreachable))
	_, err = c.ListClusters(ctx, &rsyncv1.ListClustersRequest{Provider: "edge", State: "Down"})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	require.Equal(t, "state", errs.FieldOf(status.Convert(err)))

	// The API server stops: Unreachable within two probe intervals.
	kc.StopAPIServer()
	t.Cleanup(func() { _ = kc.StartAPIServer(context.Background()) }) // already running: an error, ignored
	stopped := time.Now()
	down := waitState(t, c, "alive", engine.HealthUnreachable, 2*probeInterval)
	t.Logf("Unreachable %s after the API server stopped (interval %s): %v", time.Since(stopped).Round(time.Millisecond), probeInterval, down.GetStatus())
	require.True(t, down.GetStatus().GetSince().AsTime().After(st.GetSince().AsTime()), "since is the change's time")
	require.Equal(t, st.GetLastSeen().AsTime(), down.GetStatus().GetLastSeen().AsTime(), "last seen is the last Ready probe's")
	require.NotEmpty(t, down.GetStatus().GetLastError())
	// The other two name the same API server: down for them too.
	require.Eventually(t, func() bool { return len(list(engine.HealthUnreachable)) == 3 }, 2*probeInterval, 50*time.Millisecond)

	// A rollout to it retries, and its status says why.
	_, err = c.SubmitRollout(ctx, &rsyncv1.SubmitRolloutRequest{Owner: "lc/p/health", Clusters: []*rsyncv1.ClusterResources{
		{Provider: "edge", Cluster: "alive", Resources: resources(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "health-tenant"}}`)}}})
	require.NoError(t, err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.GetRolloutStatus(ctx, &rsyncv1.GetRolloutStatusRequest{Owner: "lc/p/health"})
		require.NoError(t, err)
		cs := r.GetStatus().GetClusters()
		require.Len(t, cs, 1)
		if cs[0].GetState() == rsyncv1.State_STATE_RETRYING {
			require.Equal(t, engine.HealthUnreachable, cs[0].GetHealth(), "%v", cs[0])
			break
		}
		require.True(t, time.Now().Before(deadline), "rollout not retrying: %v", cs[0])
		time.Sleep(50 * time.Millisecond)
	}

	// It restarts: Ready again, and the rollout settles with no health named.
	require.NoError(t, kc.StartAPIServer(ctx))
	again := waitState(t, c, "alive", engine.HealthReady, 3*probeInterval)
	require.True(t, again.GetStatus().GetSince().AsTime().After(down.GetStatus().GetSince().AsTime()))
	require.True(t, again.GetStatus().GetLastSeen().AsTime().After(st.GetLastSeen().AsTime()))
	last, _ := settle(t, c, "lc/p/health")
	require.Equal(t, rsyncv1.State_STATE_APPLIED, last.GetState(), "%v", last)
	r, err := c.GetRolloutStatus(ctx, &rsyncv1.GetRolloutStatusRequest{Owner: "lc/p/health"})
	require.NoError(t, err)
	require.Empty(t, r.GetStatus().GetClusters()[0].GetHealth())
	_, err = c.DeleteRollout(ctx, &rsyncv1.DeleteRolloutRequest{Owner: "lc/p/health"})
	require.NoError(t, err)
	settle(t, c, "lc/p/health")

}
