package typesize

import (
	"io/fs"
	"path/filepath"
	"testing"
)

// TestEveryTypeStaysSmall holds every type of the project's own packages
// (services/ and platform/; gen/ is generated) to 25 declared methods:
// one type, one job. A type that outgrows it is split into parts, as
// core's LogicalClouds and rsync's Engine were (docs/conventions.md).
func TestEveryTypeStaysSmall(t *testing.T) {
	for _, root := range []string{"../../services", "../../platform", "../../cmd"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			gos, _ := filepath.Glob(filepath.Join(p, "*.go"))
			tests, _ := filepath.Glob(filepath.Join(p, "*_test.go"))
			if len(gos) == len(tests) {
				return nil // no package here, or tests alone
			}
			over, err := Over(p, 25)
			if err != nil {
				return err
			}
			for _, o := range over {
				t.Errorf("%s: %s (split it into parts)", p, o)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
