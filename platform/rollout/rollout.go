// Package rollout reads a rollout strategy (dcm.types.v1.RolloutStrategy:
// a logical cloud's spec.rollout, a traffic intent group's rollout): it
// checks one, naming the field at fault, and resolves its count and soak.
// What a strategy does is the resource synchronizer's (docs/fleet.md,
// "Staged rollouts"); this package must not know about rollouts' state.
package rollout

import (
	"math"
	"strconv"
	"strings"
	"time"

	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

const (
	// All gives a generation to every cluster at once (the default).
	All = "all"
	// Progressive gives it in waves.
	Progressive = "progressive"
	// MaxSoak bounds soak.
	MaxSoak = 24 * time.Hour
	// MaxCount bounds a count (the resource synchronizer takes at most
	// 10,000 clusters per rollout).
	MaxCount = 10000
)

// Check refuses a strategy naming the field at fault under field (e.g.
// "spec.rollout"). nil is every cluster at once.
func Check(field string, r *typesv1.RolloutStrategy) error {
	if r == nil {
		return nil
	}
	switch r.GetStrategy() {
	case "", All, Progressive:
	default:
		return errs.Invalid(field+".strategy", "is %q: must be %q or %q", r.GetStrategy(), All, Progressive)
	}
	if mc := r.GetMaxConcurrency(); mc != "" {
		if _, _, err := parseConcurrency(field+".max-concurrency", mc); err != nil {
			return err
		}
	}
	if n := r.GetMaxFailures(); n < 0 || n > MaxCount {
		return errs.Invalid(field+".max-failures", "is %d: must be between 0 and %d", n, MaxCount)
	}
	if s := r.GetSoak(); s != "" {
		if _, err := parseSoak(field+".soak", s); err != nil {
			return err
		}
	}
	if l := r.GetOrderByLabel(); l != "" && strings.ContainsAny(l, " \t\n,") {
		return errs.Invalid(field+".order-by-label", "is %q: must be one cluster label", l)
	}
	return nil
}

// WaveSize is how many of clusters a wave of a checked progressive r
// holds: max-concurrency, a percent of clusters rounded up; at least 1.
func WaveSize(r *typesv1.RolloutStrategy, clusters int) int {
	n, percent, err := parseConcurrency("max-concurrency", r.GetMaxConcurrency())
	switch {
	case r.GetMaxConcurrency() == "" || err != nil:
		return 1
	case percent:
		return max(1, int(math.Ceil(float64(clusters)*float64(n)/100)))
	}
	return n
}

// Soak is a checked r's soak (0 when not given).
func Soak(r *typesv1.RolloutStrategy) time.Duration {
	d, err := parseSoak("soak", r.GetSoak())
	if r.GetSoak() == "" || err != nil {
		return 0
	}
	return d
}

// parseConcurrency reads max-concurrency: a count from 1 to MaxCount, or
// a percent from 1% to 100% (percent true).
func parseConcurrency(field, s string) (n int, percent bool, err error) {
	num, percent := strings.CutSuffix(s, "%")
	n, err = strconv.Atoi(num)
	switch {
	case err != nil:
		return 0, false, errs.Invalid(field, "is %q: must be a count (\"2\") or a percent of the clusters (\"25%%\")", s)
	case percent && (n < 1 || n > 100):
		return 0, false, errs.Invalid(field, "is %q: a percent must be from 1%% to 100%%", s)
	case !percent && (n < 1 || n > MaxCount):
		return 0, false, errs.Invalid(field, "is %q: a count must be from 1 to %d", s, MaxCount)
	}
	return n, percent, nil
}

// parseSoak reads soak: a duration from 0 to MaxSoak.
func parseSoak(field, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, errs.Invalid(field, "is %q: must be a duration (\"30s\", \"5m\")", s)
	case d < 0 || d > MaxSoak:
		return 0, errs.Invalid(field, "is %q: must be from 0s to %s", s, MaxSoak)
	}
	return d, nil
}
