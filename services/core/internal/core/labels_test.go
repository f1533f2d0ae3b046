package core

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// TestFollowLabelsValidated: follow-labels is taken in seed 002's flat
// body with cluster-labels (kept as spec.follow-labels; unset follows),
// and refused, naming the field, where there are no labels to follow: the
// flat body without cluster-labels, seed 000's body (which selects no
// clusters by label).
func TestFollowLabelsValidated(t *testing.T) {
	t.Parallel()
	plan := func(body string) (*plan, error) {
		req := &corev1.CreateLogicalCloudRequest{}
		require.NoError(t, protojson.Unmarshal([]byte(body), req))
		req.Project = "p1"
		return planCreate(req, grants{})
	}
	p, err := plan(`{"name": "lc-1", "cluster-labels": "edge", "follow-labels": false}`)
	require.NoError(t, err)
	require.NotNil(t, p.lc.GetSpec().FollowLabels)
	require.False(t, followsLabels(p.lc))
	p, err = plan(`{"name": "lc-1", "cluster-labels": "edge"}`)
	require.NoError(t, err)
	require.Nil(t, p.lc.GetSpec().FollowLabels)
	require.True(t, followsLabels(p.lc), "a label-selected logical cloud follows by default")

	for body, field := range map[string]string{
		`{"name": "lc-1", "follow-labels": true}`:                                                     "follow-labels",
		`{"metadata": {"name": "lc-1"}, "spec": {"follow-labels": true}}`:                             "spec.follow-labels",
		`{"metadata": {"name": "lc-1"}, "spec": {"follow-labels": false}}`:                            "spec.follow-labels",
		`{"metadata": {"name": "lc-1"}, "spec": {"cluster-labels": ["edge"], "follow-labels": true}}`: "spec.follow-labels",
	} {
		_, err := plan(body)
		require.Equal(t, codes.InvalidArgument, errs.Code(err), "%s: %v", body, err)
		require.Equal(t, field, errs.FieldOf(status.Convert(err)), body)
	}
	require.False(t, followsLabels(&corev1.LogicalCloud{}), "no labels, nothing to follow")
}

// TestLabelWords: a reason names the labels as a person would.
func TestLabelWords(t *testing.T) {
	t.Parallel()
	require.Equal(t, "label edge", labelWords([]string{"edge"}))
	require.Equal(t, "labels edge, sriov", labelWords([]string{"edge", "sriov"}))
}
