package core

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
)

// TestDerive is the lifecycle state machine as a table: the state shown
// for each stored phase and resource synchronizer status (docs/lifecycle.md,
// "States").
func TestDerive(t *testing.T) {
	t.Parallel()
	rs := func(deleting, settled bool, st rsyncv1.State) *rsyncv1.RolloutStatus {
		return &rsyncv1.RolloutStatus{Deleting: deleting, Settled: settled, State: st}
	}
	const (
		applied  = rsyncv1.State_STATE_APPLIED
		deleted  = rsyncv1.State_STATE_DELETED
		failed   = rsyncv1.State_STATE_FAILED
		retrying = rsyncv1.State_STATE_RETRYING
		pending  = rsyncv1.State_STATE_PENDING
		stopped  = rsyncv1.State_STATE_STOPPED
	)
	cases := []struct {
		phase string
		rs    *rsyncv1.RolloutStatus
		want  string
	}{
		// Created whatever rsync says.
		{phaseCreated, nil, StateCreated},
		{phaseCreated, rs(false, true, applied), StateCreated},
		// Applying.
		{phaseApplying, rs(false, false, pending), StateInstantiating},
		{phaseApplying, rs(false, false, retrying), StateInstantiating},
		{phaseApplying, rs(false, true, stopped), StateInstantiating},
		{phaseApplying, rs(false, true, applied), StateInstantiated},
		{phaseApplying, rs(false, true, failed), StateInstantiateFailed},
		{phaseApplying, nil, StateInstantiateFailed},
		// A progressive rollout paused (rollout.go); stopped, it shows so.
		{phaseApplying, &rsyncv1.RolloutStatus{Settled: true, State: failed, Progress: &rsyncv1.RolloutProgress{Paused: true}}, StatePaused},
		{phaseApplying, &rsyncv1.RolloutStatus{Settled: true, State: failed, Progress: &rsyncv1.RolloutProgress{}}, StateInstantiateFailed},
		{phaseApplying, &rsyncv1.RolloutStatus{Settled: true, Stopped: true, State: stopped, Progress: &rsyncv1.RolloutProgress{Paused: true}}, StateInstantiating},
		// Terminating.
		{phaseTerminating, rs(true, false, pending), StateTerminating},
		{phaseTerminating, rs(true, true, stopped), StateTerminating},
		{phaseTerminating, rs(true, true, deleted), StateTerminated},
		{phaseTerminating, rs(true, true, failed), StateTerminateFailed},
		{phaseTerminating, nil, StateTerminated},
	}
	for _, c := range cases {
		require.Equal(t, c.want, derive(c.phase, c.rs), "%s %v", c.phase, c.rs)
	}
}

// TestTransitions: from which states each call may start, and that every
// state is left by some call (no state is a dead end but Terminated,
// which apply and delete leave).
func TestTransitions(t *testing.T) {
	t.Parallel()
	all := []string{StateCreated, StateInstantiating, StateInstantiated, StateInstantiateFailed, StatePaused, StateTerminating, StateTerminated, StateTerminateFailed}
	from := map[string][]string{"apply": applyFrom, "update": updateFrom, "stop": stopFrom, "terminate": terminateFrom, "delete": deleteFrom,
		"resume": resumeFrom, "rollback": rollbackFrom}
	want := map[string]map[string]bool{
		StateCreated:           {"apply": true, "delete": true},
		StateInstantiating:     {"update": true, "stop": true, "terminate": true, "rollback": true},
		StateInstantiated:      {"update": true, "stop": true, "terminate": true, "rollback": true},
		StateInstantiateFailed: {"update": true, "stop": true, "terminate": true, "rollback": true},
		StatePaused:            {"update": true, "stop": true, "terminate": true, "resume": true, "rollback": true},
		StateTerminating:       {"stop": true, "terminate": true},
		StateTerminated:        {"apply": true, "delete": true},
		StateTerminateFailed:   {"stop": true, "terminate": true},
	}
	for _, st := range all {
		for call, states := range from {
			require.Equal(t, want[st][call], slices.Contains(states, st), fmt.Sprintf("%s from %s", call, st))
		}
	}
}
