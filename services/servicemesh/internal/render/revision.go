package render

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// revisionHash is how many hex digits of the hash a revision carries.
const revisionHash = 8

// Revision is the Istio revision of project's logical cloud lc: the
// logical cloud's name (cut to fit) and a short hash of project and
// logical cloud, e.g. "lc1-3f9a2b1c". Two logical clouds of the same name
// in two projects get two revisions, so neither's injector, validator or
// claim is named like the other's. At most MaxRevision characters, a DNS
// label.
func Revision(project, lc string) string {
	sum := sha256.Sum256([]byte(project + "/" + lc))
	h := hex.EncodeToString(sum[:])[:revisionHash]
	prefix := lc
	if n := MaxRevision - revisionHash - 1; len(prefix) > n {
		prefix = prefix[:n]
	}
	prefix = strings.TrimRight(prefix, "-")
	if prefix == "" {
		return h
	}
	return prefix + "-" + h
}
