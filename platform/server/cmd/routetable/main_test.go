package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/dcm-project/dcm/platform/server"
)

// TestRoutesGenUpToDate: cmd/dcmctl/routes_gen.go is what the contracts
// declare now, every binding of every RPC (a route the protos declare and
// the table lacks, or one it keeps after the protos dropped it, fails
// here as well as in make check-generated).
func TestRoutesGenUpToDate(t *testing.T) {
	t.Parallel()
	want, err := Source()
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "cmd", "dcmctl", "routes_gen.go"))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "cmd/dcmctl/routes_gen.go is stale: make generate")
	bs, err := server.HTTPBindings()
	require.NoError(t, err)
	require.NotEmpty(t, bs)
	for _, b := range bs {
		require.Contains(t, string(got), `{"`+b.Method+`", "`+b.Path+`"}`, "%s", b.RPC)
	}
}

// TestEveryContractLinked: every proto file under proto/dcm that declares
// a service is linked here, so the table leaves none of its routes out.
func TestEveryContractLinked(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "..", "..", "proto")
	service := regexp.MustCompile(`(?m)^service \w+ \{`)
	n := 0
	err := filepath.WalkDir(filepath.Join(root, "dcm"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".proto") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil || !service.Match(b) {
			return err
		}
		rel, err := filepath.Rel(root, path)
		require.NoError(t, err)
		_, err = protoregistry.GlobalFiles.FindFileByPath(filepath.ToSlash(rel))
		require.NoError(t, err, "routetable imports the Go package of %s", rel)
		n++
		return nil
	})
	require.NoError(t, err)
	require.NotZero(t, n)
}
