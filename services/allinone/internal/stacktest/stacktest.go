// Package stacktest starts the whole all-in-one program for a test: every
// service and the gateway on free loopback ports, on an embedded store in a
// temporary directory (or a fresh database on DCM_TEST_MONGO_URI). It is
// the program users run, not a test double.
package stacktest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/services/allinone"
)

// Stack is a running all-in-one program.
type Stack struct {
	*app.Program
	// URL is the REST base URL, e.g. http://127.0.0.1:40123.
	URL string
	// GRPC is the combined gRPC endpoint.
	GRPC string
}

// Start runs the program until the test ends, then checks it shut down cleanly.
func Start(t testing.TB) *Stack {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the whole program: not in -short (make test-unit)")
	}
	args := []string{
		"-grpc-addr", "127.0.0.1:0",
		"-http-addr", "127.0.0.1:0",
		"-data-dir", t.TempDir(),
		"-log-level", "warn",
	}
	if uri := os.Getenv("DCM_TEST_MONGO_URI"); uri != "" {
		args = append(args, "-mongo-uri", uri, "-mongo-database", fmt.Sprintf("dcmstack_%d", time.Now().UnixNano()))
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := app.Start(ctx, allinone.Name, args, true, allinone.Build)
	if err != nil {
		cancel()
		t.Fatalf("start all-in-one: %v", err)
	}
	t.Cleanup(func() {
		if os.Getenv("DCM_TEST_MONGO_URI") != "" {
			_ = p.Env.Store.Database().Drop(context.Background())
		}
		cancel()
		if err := p.Wait(); err != nil {
			t.Errorf("all-in-one stopped with %v", err)
		}
	})
	return &Stack{Program: p, URL: "http://" + p.Server.HTTPAddr(), GRPC: p.Server.GRPCAddr()}
}
