// Package storetest opens the store that tests run against: a fresh database
// on the real MongoDB at DCM_TEST_MONGO_URI when it is set, otherwise an
// embedded FerretDB in a temporary directory. Never an in-memory fake.
package storetest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dcm-project/dcm/platform/store"
)

// Open returns a store with an empty database, closed (and, on a real
// MongoDB, dropped) when the test ends.
func Open(t testing.TB) *store.Store {
	t.Helper()
	uri := os.Getenv("DCM_TEST_MONGO_URI")
	cfg := store.Config{
		URI:      uri,
		Database: fmt.Sprintf("dcmtest_%d", time.Now().UnixNano()),
		DataDir:  t.TempDir(),
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
