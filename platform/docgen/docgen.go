// Package docgen writes text that `make generate` makes from the code
// into a checked-in document, between a begin and an end marker.
package docgen

import (
	"bytes"
	"fmt"
	"os"
)

// Replace puts content between the markers begin and end of the file at
// path (after begin and a newline; end stays where it was) and writes the
// file only when that changes it. A marker missing is an error.
func Replace(path, begin, end, content string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i := bytes.Index(old, []byte(begin))
	if i < 0 {
		return fmt.Errorf("%s: no %q marker", path, begin)
	}
	j := bytes.Index(old[i:], []byte(end))
	if j < 0 {
		return fmt.Errorf("%s: no %q after %q", path, end, begin)
	}
	j += i
	var out bytes.Buffer
	out.Write(old[:i+len(begin)])
	out.WriteString("\n")
	out.WriteString(content)
	out.Write(old[j:])
	if bytes.Equal(out.Bytes(), old) {
		return nil
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}
