package core

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"sigs.k8s.io/yaml"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// peersRsync is the resource synchronizer as MeshPeers sees it: the
// logical cloud's rollout with a reader ServiceAccount per cluster in a
// state the test sets, the clusters' connections, tokens numbered as made,
// and the remote secrets' rollout as submitted, updated and deleted.
type peersRsync struct {
	rsyncv1.RsyncInternalServiceClient // what MeshPeers does not call: nil

	mu      sync.Mutex
	readers map[string]rsyncv1.State // cluster → its reader's state
	tokens  int
	peers   []*rsyncv1.ClusterResources // the remote secrets' rollout; nil: none
	calls   []string                    // submit, update, delete, in order
}

func (f *peersRsync) GetRolloutStatus(_ context.Context, in *rsyncv1.GetRolloutStatusRequest, _ ...grpc.CallOption) (*rsyncv1.GetRolloutStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch in.GetOwner() {
	case rolloutOwner("p", "lc"):
		st := &rsyncv1.RolloutStatus{}
		for _, c := range []string{"c1", "c2", "c3"} {
			s, ok := f.readers[c]
			if !ok {
				continue
			}
			st.Clusters = append(st.Clusters, &rsyncv1.RolloutClusterStatus{Provider: "edge", Cluster: c, Resources: []*rsyncv1.ResourceStatus{
				{ApiVersion: "v1", Kind: "Namespace", Name: "lc-istio-system", Operation: rsyncv1.Operation_OPERATION_APPLY, State: rsyncv1.State_STATE_APPLIED},
				{ApiVersion: "v1", Kind: "ServiceAccount", Namespace: "lc-istio-system", Name: readerServiceAccount,
					Operation: rsyncv1.Operation_OPERATION_APPLY, State: s},
			}})
		}
		return &rsyncv1.GetRolloutStatusResponse{Status: st}, nil
	case meshPeersOwner("p", "lc"):
		if f.peers == nil {
			return nil, errs.NotFound("rollout %q", in.GetOwner())
		}
		return &rsyncv1.GetRolloutStatusResponse{Status: &rsyncv1.RolloutStatus{}}, nil
	}
	return nil, errs.NotFound("rollout %q", in.GetOwner())
}

func (f *peersRsync) GetClusterConnection(_ context.Context, in *rsyncv1.GetClusterConnectionRequest, _ ...grpc.CallOption) (*rsyncv1.GetClusterConnectionResponse, error) {
	return &rsyncv1.GetClusterConnectionResponse{Server: "https://" + in.GetCluster() + ".example:6443", CertificateAuthorityData: []byte("ca of " + in.GetCluster())}, nil
}

func (f *peersRsync) GetServiceAccountToken(_ context.Context, in *rsyncv1.GetServiceAccountTokenRequest, _ ...grpc.CallOption) (*rsyncv1.GetServiceAccountTokenResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens++
	return &rsyncv1.GetServiceAccountTokenResponse{Token: []byte(fmt.Sprintf("token-%d-of-%s", f.tokens, in.GetCluster()))}, nil
}

func (f *peersRsync) SubmitRollout(_ context.Context, in *rsyncv1.SubmitRolloutRequest, _ ...grpc.CallOption) (*rsyncv1.SubmitRolloutResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.peers != nil {
		return nil, errs.AlreadyExists("rollout %q", in.GetOwner())
	}
	f.peers, f.calls = in.GetClusters(), append(f.calls, "submit")
	return &rsyncv1.SubmitRolloutResponse{Generation: 1}, nil
}

func (f *peersRsync) UpdateRollout(_ context.Context, in *rsyncv1.UpdateRolloutRequest, _ ...grpc.CallOption) (*rsyncv1.UpdateRolloutResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.peers == nil {
		return nil, errs.NotFound("rollout %q", in.GetOwner())
	}
	f.peers, f.calls = in.GetClusters(), append(f.calls, "update")
	return &rsyncv1.UpdateRolloutResponse{Generation: 2}, nil
}

func (f *peersRsync) DeleteRollout(_ context.Context, in *rsyncv1.DeleteRolloutRequest, _ ...grpc.CallOption) (*rsyncv1.DeleteRolloutResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.peers == nil {
		return nil, errs.NotFound("rollout %q", in.GetOwner())
	}
	f.peers, f.calls = nil, append(f.calls, "delete")
	return &rsyncv1.DeleteRolloutResponse{}, nil
}

// given says, per cluster of the remote secrets' rollout, the clusters it
// was given a remote secret of and the token each holds.
func (f *peersRsync) given(t *testing.T) map[string]map[string]string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]map[string]string{}
	for _, cr := range f.peers {
		got := map[string]string{}
		for _, r := range cr.GetResources() {
			require.True(t, r.GetSensitive(), "a remote secret is sealed")
			var secret struct {
				Metadata struct {
					Name, Namespace string
					Labels          map[string]string
				}
				Data map[string][]byte
			}
			require.NoError(t, yaml.Unmarshal([]byte(r.GetManifest()), &secret))
			require.Equal(t, "lc-istio-system", secret.Metadata.Namespace)
			require.Equal(t, "true", secret.Metadata.Labels["istio/multiCluster"])
			require.Len(t, secret.Data, 1)
			for id, config := range secret.Data {
				require.Equal(t, "istio-remote-secret-"+id, secret.Metadata.Name)
				var kc struct {
					Clusters []struct{ Cluster struct{ Server string } }
					Users    []struct{ User struct{ Token string } }
				}
				require.NoError(t, yaml.Unmarshal(config, &kc))
				require.Len(t, kc.Users, 1)
				got[kc.Clusters[0].Cluster.Server] = kc.Users[0].User.Token
			}
		}
		out[cr.GetCluster()] = got
	}
	return out
}

func (f *peersRsync) set(readers map[string]rsyncv1.State) {
	f.mu.Lock()
	f.readers = readers
	f.mu.Unlock()
}

func (f *peersRsync) history() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// TestMeshPeersRenewAndLeave: the rounds of MeshPeers on a mesh logical
// cloud as its clusters and the clock change. Two readers applied: each
// cluster gets one remote secret, of the other, with a token of the
// other's reader. A later round within half the tokens' life makes no
// token and changes nothing; past it, new tokens replace the old. A third
// cluster not yet applied (an update under way) leaves what was given;
// once applied, each cluster has the other two. An update that leaves one
// cluster deletes the remote secrets; turning the mesh off is not peered.
func TestMeshPeersRenewAndLeave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Open(t)
	reader := &cloudReader{projects: projectRecords(st), clouds: cloudRecords(st)}
	require.NoError(t, reader.clouds.Create(ctx, "p/lc", "p", &corev1.LogicalCloud{Metadata: &typesv1.Metadata{Name: "lc"},
		Spec:      &corev1.LogicalCloudSpec{ServiceMesh: &corev1.ServiceMesh{Enabled: true}},
		Lifecycle: &corev1.Lifecycle{Phase: phaseApplying}}))
	rs := &peersRsync{}
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	s := &MeshPeers{cloudReader: reader, rollouts: &rollouts{rsync: rs, log: zap.NewNop()},
		locks: replicaLocks(st, 0, DefaultLockTTL), log: zap.NewNop(), now: func() time.Time { return now },
		given: map[string]peersGiven{}}
	round := func() {
		t.Helper()
		require.NoError(t, s.ReconcileMeshPeers(ctx))
	}
	server := func(c string) string { return "https://" + c + ".example:6443" }

	// One reader applied, the other still pending: nothing yet.
	rs.set(map[string]rsyncv1.State{"c1": rsyncv1.State_STATE_APPLIED, "c2": rsyncv1.State_STATE_PENDING})
	round()
	require.Empty(t, rs.history())

	rs.set(map[string]rsyncv1.State{"c1": rsyncv1.State_STATE_APPLIED, "c2": rsyncv1.State_STATE_APPLIED})
	round()
	require.Equal(t, []string{"submit"}, rs.history())
	first := rs.given(t)
	require.Len(t, first, 2)
	require.Equal(t, map[string]string{server("c2"): first["c1"][server("c2")]}, first["c1"], "c1 has a remote secret of c2 only")
	require.Equal(t, map[string]string{server("c1"): first["c2"][server("c1")]}, first["c2"], "c2 has a remote secret of c1 only")
	require.True(t, strings.HasSuffix(first["c1"][server("c2")], "-of-c2"), "c2's reader's token: %s", first["c1"][server("c2")])
	require.True(t, strings.HasSuffix(first["c2"][server("c1")], "-of-c1"))
	require.Equal(t, 2, rs.tokens)

	// Within half the tokens' life: no new token, no call.
	now = now.Add(peersTokenLifetime/2 - time.Minute)
	round()
	require.Equal(t, 2, rs.tokens, "no token made before half its life")
	require.Equal(t, []string{"submit"}, rs.history())

	// Past it: new tokens, by an update of the rollout.
	now = now.Add(2 * time.Minute)
	round()
	require.Equal(t, 4, rs.tokens)
	require.Equal(t, []string{"submit", "update"}, rs.history())
	renewed := rs.given(t)
	require.NotEqual(t, first["c1"][server("c2")], renewed["c1"][server("c2")], "c1's remote secret of c2 has a new token")
	require.NotEqual(t, first["c2"][server("c1")], renewed["c2"][server("c1")])

	// A third cluster joins: while its reader is pending what was given
	// stays; once applied, each cluster has the other two.
	rs.set(map[string]rsyncv1.State{"c1": rsyncv1.State_STATE_APPLIED, "c2": rsyncv1.State_STATE_APPLIED, "c3": rsyncv1.State_STATE_PENDING})
	round()
	require.Equal(t, []string{"submit", "update"}, rs.history(), "a reader pending leaves the remote secrets given")
	require.Equal(t, renewed, rs.given(t))
	rs.set(map[string]rsyncv1.State{"c1": rsyncv1.State_STATE_APPLIED, "c2": rsyncv1.State_STATE_APPLIED, "c3": rsyncv1.State_STATE_APPLIED})
	round()
	require.Equal(t, []string{"submit", "update", "update"}, rs.history())
	three := rs.given(t)
	require.Len(t, three, 3)
	for c, got := range three {
		require.Len(t, got, 2, "%s has a remote secret of each other cluster", c)
		require.NotContains(t, got, server(c), "%s has none of itself", c)
	}

	// An update leaves one cluster: the remote secrets are deleted, and a
	// second round finds nothing to delete.
	rs.set(map[string]rsyncv1.State{"c1": rsyncv1.State_STATE_APPLIED})
	round()
	round()
	require.Equal(t, []string{"submit", "update", "update", "delete"}, rs.history())

	// Two clusters again, then the mesh turned off (the update deletes the
	// rollout itself, deletePeers): a logical cloud without a mesh is not
	// peered.
	rs.set(map[string]rsyncv1.State{"c1": rsyncv1.State_STATE_APPLIED, "c2": rsyncv1.State_STATE_APPLIED})
	round()
	require.Equal(t, []string{"submit", "update", "update", "delete", "submit"}, rs.history(), "given again after a deletion")
	_, err := reader.clouds.Modify(ctx, "p/lc", func(c *corev1.LogicalCloud) error {
		c.Spec.ServiceMesh.Enabled = false
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, s.deletePeers(ctx, "p", "lc", false))
	tokens := rs.tokens
	now = now.Add(peersTokenLifetime)
	round()
	require.Equal(t, tokens, rs.tokens, "no token for a logical cloud without a mesh")
	require.Equal(t, []string{"submit", "update", "update", "delete", "submit", "delete"}, rs.history())
}
