// Package storetest opens the store that tests run against: a fresh database
// on the real MongoDB at DCM_TEST_MONGO_URI when it is set, otherwise an
// embedded FerretDB in a temporary directory. Never an in-memory fake.
package storetest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dcm-project/dcm/platform/secrets"
	"github.com/dcm-project/dcm/platform/store"
)

// Keyring returns a keyring with one fresh key.
func Keyring(t testing.TB) *secrets.Keyring {
	t.Helper()
	k, err := secrets.ParseKeyring(secrets.NewKeyLine("test"))
	if err != nil {
		t.Fatalf("keyring: %v", err)
	}
	return k
}

// Open returns a store with an empty database, closed (and, on a real
// MongoDB, dropped) when the test ends.
func Open(t testing.TB) *store.Store {
	t.Helper()
	uri := os.Getenv("DCM_TEST_MONGO_URI")
	cfg := store.Config{
		URI:      uri,
		Database: fmt.Sprintf("dcmtest_%d", time.Now().UnixNano()),
		DataDir:  t.TempDir(),
		Keyring:  Keyring(t),
	}
	// Not zaptest: the embedded store's goroutines may log after the test.
	log, _ := zap.NewDevelopment(zap.IncreaseLevel(zap.ErrorLevel))
	s, err := store.Open(cfg, log)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if uri != "" {
			_ = s.Database().Drop(ctx)
		}
		s.Close(ctx)
	})
	return s
}

// FilesContain reports whether any regular file under dir holds needle:
// tests read a store's raw files to prove a secret never reached them in
// clear. Sockets are passed over.
func FilesContain(t testing.TB, dir string, needle []byte) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = found || bytes.Contains(b, needle)
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return found
}
