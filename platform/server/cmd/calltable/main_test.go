package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// TestEveryContractInTheTable: every proto file under proto/dcm that
// declares a service is linked here, so the table leaves none out, and
// every method of them declares callers.
func TestEveryContractInTheTable(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "..", "..", "proto")
	service := regexp.MustCompile(`(?m)^service \w+ \{`)
	n := 0
	err := filepath.WalkDir(filepath.Join(root, "dcm"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".proto") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !service.Match(b) {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		require.NoError(t, err)
		_, err = protoregistry.GlobalFiles.FindFileByPath(filepath.ToSlash(rel))
		require.NoError(t, err, "calltable imports the Go package of %s", rel)
		n++
		return nil
	})
	require.NoError(t, err)
	require.NotZero(t, n)
	_, err = Table()
	require.NoError(t, err)
}
