package core

import (
	"testing"

	"github.com/dcm-project/dcm/platform/typesize"
)

// TestTypesStaySmall: no type of core declares more than 25 methods (issue
// 31, "one type, one job"): the logical clouds' service is composed of
// parts, each with its own job, collections and peers.
func TestTypesStaySmall(t *testing.T) {
	typesize.Check(t, ".", 25)
}
