package store_test

import (
	"testing"

	"github.com/dcm-project/dcm/platform/typesize"
)

// TestTypesStaySmall: no type of the store declares more than 25 methods
// (issue 31, "one type, one job").
func TestTypesStaySmall(t *testing.T) {
	typesize.Check(t, ".", 25)
}
