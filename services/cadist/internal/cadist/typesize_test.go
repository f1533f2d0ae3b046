package cadist

import (
	"testing"

	"github.com/dcm-project/dcm/platform/typesize"
)

// TestTypesStaySmall: no type of the CA distribution service declares more
// than 25 methods (issue 31, "one type, one job"): Service is a thin
// composition of parts, each with its own job, collections and settings
// (docs/mesh.md section 6, "Parts").
func TestTypesStaySmall(t *testing.T) {
	typesize.Check(t, ".", 25)
}
