// Package goldentest compares what a test makes with a golden file,
// testdata/<name>.golden in the test's package; `go test -update`
// rewrites the files. It is a test harness: only tests import it.
package goldentest

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden with what the tests make")

// Check compares got with testdata/name.golden, or writes it there with
// -update.
func Check(t testing.TB, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o750))
		require.NoError(t, os.WriteFile(file, got, 0o600))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err, "go test -run %s -update writes it", t.Name())
	require.Equal(t, string(want), string(got), "differs from %s (go test -update rewrites it)", file)
}

// Manifests compares rendered manifests, one a line, with
// testdata/name.golden.
func Manifests(t testing.TB, name string, manifests []string) {
	t.Helper()
	Check(t, name, []byte(strings.Join(manifests, "\n")+"\n"))
}
