package openapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/errs"
)

// TestReasonsComplete: Reasons lists every Reason constant of
// platform/errs (read from its source), so the document's enum of
// "reason" is complete.
func TestReasonsComplete(t *testing.T) {
	t.Parallel()
	_, here, _, ok := runtime.Caller(0)
	require.True(t, ok)
	file := filepath.Join(filepath.Dir(here), "..", "..", "..", "..", "platform", "errs", "errs.go")
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	require.NoError(t, err)
	var declared []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "Reason" {
				for _, n := range v.Names {
					declared = append(declared, n.Name)
				}
			}
		}
	}
	require.NotEmpty(t, declared)
	require.Len(t, Reasons, len(declared), "openapi.Reasons lists every errs.Reason%v", declared)
	seen := map[errs.Reason]bool{}
	for _, r := range Reasons {
		require.False(t, seen[r], "%s twice", r)
		seen[r] = true
	}
}

// TestDocsAssets: the page refers only to this server's paths, every
// asset it loads is served with the Content-Security-Policy, and the
// bundle stays small.
func TestDocsAssets(t *testing.T) {
	t.Parallel()
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		Docs.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w
	}
	page := get(DocsPath)
	require.Equal(t, http.StatusOK, page.Code)
	require.Equal(t, DocsCSP, page.Header().Get("Content-Security-Policy"))
	require.NotContains(t, page.Body.String(), "://")
	refs := regexp.MustCompile(`(?i)\b(?:src|href|spec-url)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(page.Body.String(), -1)
	require.Len(t, refs, 2, "the spec and the bundle")
	for _, m := range refs {
		ref := m[1]
		if ref == "/openapi.json" {
			continue
		}
		require.True(t, strings.HasPrefix(ref, DocsPath+"/"), ref)
		w := get(ref)
		require.Equal(t, http.StatusOK, w.Code, ref)
		require.Equal(t, DocsCSP, w.Header().Get("Content-Security-Policy"))
		require.Equal(t, "text/javascript; charset=utf-8", w.Header().Get("Content-Type"))
	}
	err := fs.WalkDir(assets, "docs", func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if info, err := d.Info(); err == nil && !d.IsDir() {
			require.Less(t, info.Size(), int64(2<<20), "%s stays under 2 MB", p)
		}
		return nil
	})
	require.NoError(t, err)
	// The licences travel with the bundle.
	require.Equal(t, http.StatusOK, get(DocsPath+"/LICENSE").Code)
	require.Equal(t, http.StatusOK, get(DocsPath+"/redoc.standalone.js.LICENSE.txt").Code)
	require.Equal(t, http.StatusNotFound, get(DocsPath+"/README.md").Code)
}

// TestRPC names the RPC of generated operationIds.
func TestRPC(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]string{
		"LogicalCloudService_ApplyLogicalCloud":            "ApplyLogicalCloud",
		"TrafficLifecycleService_ApplyTrafficIntentGroup3": "ApplyTrafficIntentGroup",
	} {
		got, err := RPC(id)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, id := range []string{"", "NoMethod", "Svc_", "Svc_12"} {
		_, err := RPC(id)
		require.Error(t, err, id)
	}
}
