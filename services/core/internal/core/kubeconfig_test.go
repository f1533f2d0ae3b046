package core

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/pki"
)

func TestRenewDue(t *testing.T) {
	t.Parallel()
	ca, err := pki.NewCA("test", time.Hour)
	require.NoError(t, err)
	start := time.Now().Truncate(time.Second)
	end := start.Add(100 * time.Minute)
	certPEM, _, err := ca.Issue(pki.Request{Identity: pki.Identity{Subject: "u"}, Client: true, NotBefore: start, NotAfter: end})
	require.NoError(t, err)
	for _, c := range []struct {
		percent int
		at      time.Duration
		due     bool
	}{
		{50, 49 * time.Minute, false},
		{50, 51 * time.Minute, true},
		{10, 9 * time.Minute, false},
		{10, 11 * time.Minute, true},
		{90, 89 * time.Minute, false},
		{0, 51 * time.Minute, true}, // unset: half
	} {
		require.Equal(t, c.due, renewDue(certPEM, c.percent, start.Add(c.at)), "%d%% at %s", c.percent, c.at)
	}
	require.True(t, renewDue([]byte("not PEM"), 50, start), "an unreadable certificate is renewed")
}
