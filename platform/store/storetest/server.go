package storetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dcm-project/dcm/platform/store/storeserver"
)

// Server starts a store server of the test's own (PostgreSQL and FerretDB,
// platform/store/storeserver) in a fresh directory, for users, stopped when
// the test ends: for a test that stops or kills it. It needs PostgreSQL
// installed, so it runs only where make test and make test-store-server
// say it may (DCM_TEST_STORE_SERVER=1) and skips the test otherwise.
func Server(t testing.TB, users []storeserver.User) *storeserver.Server {
	t.Helper()
	if os.Getenv("DCM_TEST_STORE_SERVER") == "" {
		t.Skip("starts PostgreSQL: run by make test or make test-store-server (DCM_TEST_STORE_SERVER=1)")
	}
	// Not t.TempDir: PostgreSQL's user must traverse the path when the
	// tests run as root, and TempDir's parent is 0700.
	dir, err := os.MkdirTemp("", "dcm-store-test-")
	if err != nil {
		t.Fatalf("store server directory: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatalf("store server directory: %v", err)
	}
	s, err := storeserver.New(storeserver.Config{Dir: filepath.Join(dir, "server"), Users: users})
	if err != nil {
		t.Fatalf("store server: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("start store server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}
