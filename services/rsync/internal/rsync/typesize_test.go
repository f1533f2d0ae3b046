package rsync

import (
	"testing"

	"github.com/dcm-project/dcm/platform/typesize"
)

// TestTypesStaySmall: no type of the rsync service declares more than 25
// methods (issue 31, "one type, one job"): Service is composed of the
// registry, the rollouts and the read-backs (docs/rsync.md, "Parts").
func TestTypesStaySmall(t *testing.T) {
	typesize.Check(t, ".", 25)
}
