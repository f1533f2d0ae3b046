package typesize_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/typesize"
)

// writePkg writes a package whose type Big declares n methods (half on a
// pointer receiver), Small one, and a test file whose methods do not count.
func writePkg(t *testing.T, n int) string {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("package p\n\ntype Big struct{ Small }\n\ntype Small struct{}\n\nfunc (Small) M() {}\n\ntype G[T any] struct{}\n\nfunc (*G[T]) M() {}\n")
	for i := range n {
		recv := "Big"
		if i%2 == 0 {
			recv = "*Big"
		}
		fmt.Fprintf(&b, "\nfunc (b %s) M%d() {}\n", recv, i)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.go"), []byte(b.String()), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p_test.go"),
		[]byte("package p\n\nfunc (Small) T1() {}\nfunc (Small) T2() {}\n"), 0o600))
	return dir
}

// TestMethodsCountsDeclaredMethods: methods of T and *T count, generic
// receivers are named by their type, embedded and test-file methods do not.
func TestMethodsCountsDeclaredMethods(t *testing.T) {
	counts, err := typesize.Methods(writePkg(t, 26))
	require.NoError(t, err)
	require.Equal(t, map[string]int{"Big": 26, "Small": 1, "G": 1}, counts)
}

// TestOverNamesTheTypesAboveTheLimit: 26 methods is over 25, 25 is not.
func TestOverNamesTheTypesAboveTheLimit(t *testing.T) {
	over, err := typesize.Over(writePkg(t, 26), 25)
	require.NoError(t, err)
	require.Equal(t, []string{"Big: 26 methods"}, over)
	over, err = typesize.Over(writePkg(t, 25), 25)
	require.NoError(t, err)
	require.Empty(t, over)
	_, err = typesize.Over(t.TempDir(), 25)
	require.ErrorContains(t, err, "no Go package")
}
