package allinone_test

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// storeCommands is how many store commands the process has sent, by the
// driver's count (dcm_store_command_seconds, platform/store/metrics.go).
func storeCommands(t *testing.T) uint64 {
	t.Helper()
	families, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	var n uint64
	for _, f := range families {
		if f.GetName() != "dcm_store_command_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// TestListPageStoreCommands: a list page of logical clouds costs a few
// store commands whatever the number of logical clouds on it (the page,
// the permissions of all of them at once), not one per logical cloud (a
// page of 1,000 sent 1,003). The count is the whole process's, so the
// test is not parallel (no other test runs meanwhile) and takes the
// least of three pages (a background loop may add a command or two).
func TestListPageStoreCommands(t *testing.T) {
	s := stacktest.Start(t)
	r := newREST(t, s)
	r.want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	const clouds = 40
	for i := range clouds {
		r.want(201, "POST", "/v2/projects/p1/logical-clouds", fmt.Sprintf(`{"name": "lc-%02d", "user": [{"name": "u", "type": "certificate",
		  "permissions": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}]}`, i))
	}
	least := uint64(1 << 62)
	for range 3 {
		before := storeCommands(t)
		body := r.want(200, "GET", "/v2/projects/p1/logical-clouds?page-size=100", "")
		least = min(least, storeCommands(t)-before)
		require.Contains(t, body, `"lc-39"`)
	}
	t.Logf("one list page of %d logical clouds: %d store commands", clouds, least)
	require.LessOrEqual(t, least, uint64(6), "store commands for one list page of %d logical clouds", clouds)
}
