// Package nodes_test holds the all-in-one program's tests that run pods:
// its clusters have a node each (kubetest.ForTestsWithNodes). They are a
// package of their own so that go test runs them beside the node-less
// tests of services/allinone instead of after them.
package nodes_test

import (
	"os"
	"testing"

	"github.com/dcm-project/dcm/platform/kubetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}
