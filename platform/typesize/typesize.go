// Package typesize counts the methods each type of a Go package declares,
// so that a test can keep every type to one job (issue 31: "one type, one
// job"). TestEveryTypeStaysSmall holds every package of the project to 25.
//
// The count is of the methods declared with the type (or a pointer to it)
// as receiver in the package's non-test files; methods a type gets by
// embedding another are the embedded type's, so a type composed of parts
// counts only its own.
package typesize

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Methods counts the methods each type of the package in dir declares, by
// type name (test files left out).
func Methods(dir string) (map[string]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	out := map[string]int{}
	files := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files++
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			out[receiverType(fn.Recv.List[0].Type)]++
		}
	}
	if files == 0 {
		return nil, fmt.Errorf("no Go package in %s", dir)
	}
	return out, nil
}

// receiverType is the name of a receiver's type: T of T, *T, T[P] or *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return fmt.Sprintf("%T", e)
		}
	}
}

// Over lists, as "Type: n methods", the types of the package in dir that
// declare more than max methods, by name.
func Over(dir string, max int) ([]string, error) {
	counts, err := Methods(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		if n := counts[name]; n > max {
			out = append(out, fmt.Sprintf("%s: %d methods", name, n))
		}
	}
	return out, nil
}
