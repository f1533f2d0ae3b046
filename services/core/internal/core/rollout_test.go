package core

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// TestCheckRollout: a bad spec.rollout is refused naming the field.
func TestCheckRollout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in    *typesv1.RolloutStrategy
		field string
	}{
		{nil, ""},
		{&typesv1.RolloutStrategy{}, ""},
		{&typesv1.RolloutStrategy{Strategy: "all"}, ""},
		{&typesv1.RolloutStrategy{Strategy: "progressive", MaxConcurrency: "25%", MaxFailures: 2, Soak: "30s", OrderByLabel: "canary"}, ""},
		{&typesv1.RolloutStrategy{Strategy: "progressive", MaxConcurrency: "100%", Soak: "24h"}, ""},
		{&typesv1.RolloutStrategy{Strategy: "canary"}, "spec.rollout.strategy"},
		{&typesv1.RolloutStrategy{Strategy: "progressive", MaxConcurrency: "0"}, "spec.rollout.max-concurrency"},
		{&typesv1.RolloutStrategy{Strategy: "progressive", MaxConcurrency: "0%"}, "spec.rollout.max-concurrency"},
		{&typesv1.RolloutStrategy{Strategy: "progressive", MaxConcurrency: "101%"}, "spec.rollout.max-concurrency"},
		{&typesv1.RolloutStrategy{Strategy: "progressive", MaxConcurrency: "two"}, "spec.rollout.max-concurrency"},
		{&typesv1.RolloutStrategy{Strategy: "progressive", MaxFailures: -1}, "spec.rollout.max-failures"},
		{&typesv1.RolloutStrategy{Strategy: "progressive", Soak: "-1s"}, "spec.rollout.soak"},
		{&typesv1.RolloutStrategy{Strategy: "progressive", Soak: "25h"}, "spec.rollout.soak"},
		{&typesv1.RolloutStrategy{Strategy: "progressive", Soak: "soon"}, "spec.rollout.soak"},
		{&typesv1.RolloutStrategy{Strategy: "progressive", OrderByLabel: "a,b"}, "spec.rollout.order-by-label"},
	} {
		err := checkRollout("spec.rollout", c.in)
		if c.field == "" {
			require.NoError(t, err, "%v", c.in)
			continue
		}
		require.Equal(t, c.field, errs.FieldOf(errs.ToStatus(err)), "%v: %v", c.in, err)
	}
}

// TestStaging: a percent of the clusters is rounded up to a count; "all"
// and no strategy give none (every cluster at once).
func TestStaging(t *testing.T) {
	t.Parallel()
	s := &rollouts{}
	clusters := make([]*rsyncv1.ClusterResources, 7)
	for _, c := range []struct {
		mc   string
		want int32
	}{{"", 1}, {"3", 3}, {"25%", 2}, {"10%", 1}, {"100%", 7}} {
		st, got, err := s.staging(context.Background(), &typesv1.RolloutStrategy{Strategy: "progressive", MaxConcurrency: c.mc, Soak: "1m", MaxFailures: 1}, clusters)
		require.NoError(t, err)
		require.Len(t, got, 7)
		require.Equal(t, c.want, st.GetMaxConcurrency(), c.mc)
		require.Equal(t, time.Minute, st.GetSoak().AsDuration())
		require.EqualValues(t, 1, st.GetMaxFailures())
	}
	for _, r := range []*typesv1.RolloutStrategy{nil, {Strategy: "all", MaxConcurrency: "1"}} {
		st, _, err := s.staging(context.Background(), r, clusters)
		require.NoError(t, err)
		require.Nil(t, st)
	}
}

// selectOnly answers SelectClusters with fixed clusters (pure logic: the
// order-by-label partition).
type selectOnly struct {
	rsyncv1.RsyncInternalServiceClient
	labelled []*rsyncv1.SelectedCluster
}

func (f selectOnly) SelectClusters(context.Context, *rsyncv1.SelectClustersRequest, ...grpc.CallOption) (*rsyncv1.SelectClustersResponse, error) {
	return &rsyncv1.SelectClustersResponse{Clusters: f.labelled}, nil
}

// TestStagingOrderByLabel: the clusters carrying the label go first, each
// part in the references' order.
func TestStagingOrderByLabel(t *testing.T) {
	t.Parallel()
	s := &rollouts{rsync: selectOnly{labelled: []*rsyncv1.SelectedCluster{{Provider: "edge", Name: "c3"}, {Provider: "edge", Name: "c1"}, {Provider: "edge", Name: "elsewhere"}}}}
	var clusters []*rsyncv1.ClusterResources
	for _, n := range []string{"c0", "c1", "c2", "c3"} {
		clusters = append(clusters, &rsyncv1.ClusterResources{Provider: "edge", Cluster: n})
	}
	_, got, err := s.staging(context.Background(), &typesv1.RolloutStrategy{Strategy: "progressive", OrderByLabel: "canary"}, clusters)
	require.NoError(t, err)
	var names []string
	for _, c := range got {
		names = append(names, c.GetCluster())
	}
	require.Equal(t, []string{"c1", "c3", "c0", "c2"}, names)
}

// TestTrafficPaused: a traffic intent group's paused rollout shows Paused,
// and is resumed, rolled back, updated or terminated from there.
func TestTrafficPaused(t *testing.T) {
	t.Parallel()
	require.Equal(t, TrafficPaused, trafficStates[StatePaused])
	for _, from := range [][]string{trafficResumeFrom, trafficRollbackFrom, trafficUpdateFrom, trafficTerminateFrom} {
		require.Contains(t, from, TrafficPaused)
	}
	require.NotContains(t, trafficResumeFrom, TrafficApplied)
}
