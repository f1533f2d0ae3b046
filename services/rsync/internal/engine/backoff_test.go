package engine

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackoffDoublesWithJitterUpToTheCap(t *testing.T) {
	e := &applier{retryBase: time.Second, retryMax: time.Minute}
	for attempts, want := range map[int]time.Duration{
		1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 32 * time.Second, 7: time.Minute, 40: time.Minute,
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := e.backoff(attempts)
			require.GreaterOrEqual(t, d, want/2, "attempt %d", attempts)
			require.LessOrEqual(t, d, want, "attempt %d", attempts)
			seen[d] = true
		}
		require.Greater(t, len(seen), 100, "attempt %d: delays are jittered", attempts)
	}
}
