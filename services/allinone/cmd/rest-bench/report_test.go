package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteSectionPerStore: each store's run has a table of its own in the
// REST data API section; the store server's goes after the embedded
// store's the first time, and a second run of either replaces only its
// own table.
func TestWriteSectionPerStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "benchmarks.md")
	if err := os.WriteFile(path, []byte("# Benchmarks\n\n## Other\n\ntext\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	write := func(kind, text string) {
		if err := writeSection(path, kind, text); err != nil {
			t.Fatal(err)
		}
	}
	write(storeEmbedded, "embedded 1\n")
	write(storeServer, "server 1\n")
	want := "# Benchmarks\n\n## Other\n\ntext\n\n" + sectionTitle + "\n\n" +
		beginMark(storeEmbedded) + "\nembedded 1\n" + endMark + "\n\n" +
		beginMark(storeServer) + "\nserver 1\n" + endMark + "\n"
	if got := read(); got != want {
		t.Fatalf("after both runs:\n%s\nwant:\n%s", got, want)
	}
	write(storeEmbedded, "embedded 2\n")
	write(storeServer, "server 2\n")
	want = strings.NewReplacer("embedded 1", "embedded 2", "server 1", "server 2").Replace(want)
	if got := read(); got != want {
		t.Fatalf("after the second runs:\n%s\nwant:\n%s", got, want)
	}
}
