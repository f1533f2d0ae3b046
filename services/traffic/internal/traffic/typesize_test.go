package traffic_test

import (
	"testing"

	"github.com/dcm-project/dcm/platform/typesize"
)

// TestTypesStaySmall: no type of the traffic service declares more than
// 25 methods (issue 31, "one type, one job"): Service is a composition of
// parts, each with its own job and collections (docs/traffic.md, "Parts").
func TestTypesStaySmall(t *testing.T) {
	typesize.Check(t, ".", 25)
}
