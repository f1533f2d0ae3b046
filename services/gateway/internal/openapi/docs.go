package openapi

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dcm-project/dcm/platform/errs"
)

// DocsPath is where the interactive page is served; its assets are
// served under DocsPath + "/".
const DocsPath = "/docs"

// DocsCSP is the page's and its assets' Content-Security-Policy: scripts,
// the document and everything else from this server only. Redoc needs
// inline styles (styled-components writes <style> elements), data: images
// and fonts (its icons) and a blob: worker (its search index).
const DocsCSP = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// assets are the page and the vendored Redoc bundle with its licences
// (docs/README.md says which version and how to update it).
//
//go:embed docs/index.html docs/redoc.standalone.js docs/redoc.standalone.js.LICENSE.txt docs/LICENSE
var assets embed.FS

// Docs serves the interactive page (GET DocsPath) and its assets
// (GET DocsPath/<file>). They hold no data: no credential is asked for.
var Docs http.Handler = docs{}

type docs struct{}

func (docs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := "index.html"
	if r.URL.Path != DocsPath {
		name = path.Base(r.URL.Path)
		if path.Dir(r.URL.Path) != DocsPath || name == "index.html" {
			name = ""
		}
	}
	b, err := fs.ReadFile(assets, "docs/"+name)
	if name == "" || err != nil {
		errs.WriteHTTPStatus(w, http.StatusNotFound, status.New(codes.NotFound, "no route for "+r.Method+" "+r.URL.Path))
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", DocsCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// Revalidated on every load (the name carries no version); the ETag
	// makes that a 304 once the browser has it.
	h.Set("Cache-Control", "no-cache")
	sum := sha256.Sum256(b)
	h.Set("ETag", `"`+hex.EncodeToString(sum[:12])+`"`)
	switch path.Ext(name) {
	case ".html":
		h.Set("Content-Type", "text/html; charset=utf-8")
	case ".js":
		h.Set("Content-Type", "text/javascript; charset=utf-8")
	default:
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}
