package app_test

import (
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/server"
)

// TestInsecureGRPCRefusedBeforeListen: the program refuses plaintext gRPC
// on an address other hosts can reach before it listens or builds
// anything. 192.0.2.1 is not this host's: a listen there would fail with
// another error.
func TestInsecureGRPCRefusedBeforeListen(t *testing.T) {
	t.Parallel()
	build := func(context.Context, *app.Env) ([]server.Service, server.Options, error) {
		t.Fatal("built a program that must be refused")
		return nil, server.Options{}, nil
	}
	for _, addr := range []string{"192.0.2.1:0", "0.0.0.0:0"} {
		_, err := app.Start(context.Background(), "test", []string{"-insecure-grpc=true", "-grpc-addr", addr, "-data-dir", t.TempDir()}, false, build, app.LogTo(io.Discard))
		require.ErrorContains(t, err, "DCM_INSECURE_GRPC", addr)
		require.NotContains(t, err.Error(), "listen ", addr)
	}
}
