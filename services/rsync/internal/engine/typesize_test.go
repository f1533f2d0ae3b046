package engine

import (
	"testing"

	"github.com/dcm-project/dcm/platform/typesize"
)

// TestTypesStaySmall: no type of the engine declares more than 25 methods
// (issue 31, "one type, one job"): the Engine is a composition root of
// parts, each with its own job, collections and settings (docs/rsync.md,
// "Parts").
func TestTypesStaySmall(t *testing.T) {
	typesize.Check(t, ".", 25)
}
