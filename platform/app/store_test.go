package app_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/secrets"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// TestMongoURISettings: the URI is never a flag, comes from DCM_MONGO_URI
// or DCM_MONGO_URI_FILE (not both), and no error echoes it.
func TestMongoURISettings(t *testing.T) {
	build := func(context.Context, *app.Env) ([]server.Service, server.Options, error) {
		t.Fatal("built a program that must be refused")
		return nil, server.Options{}, nil
	}
	start := func(args ...string) error {
		_, err := app.Start(context.Background(), "test", append([]string{"-grpc-addr=", "-data-dir", t.TempDir()}, args...), true, build, app.LogTo(io.Discard))
		return err
	}
	require.ErrorContains(t, start("-mongo-uri", "mongodb://u:hunter2@h/"), "flag provided but not defined")
	require.ErrorContains(t, start("-kek", secrets.NewKeyLine("k1")), "flag provided but not defined")

	file := filepath.Join(t.TempDir(), "uri")
	require.NoError(t, os.WriteFile(file, []byte("  mongodb://u:hunter2@%zz/\n"), 0o600))
	err := start("-mongo-uri-file", file)
	require.ErrorContains(t, err, "invalid MongoDB URI")
	require.NotContains(t, err.Error(), "hunter2")

	require.NoError(t, os.WriteFile(file, []byte("\n"), 0o600))
	require.ErrorContains(t, start("-mongo-uri-file", file), "DCM_MONGO_URI_FILE "+file+" is empty")

	t.Setenv("DCM_MONGO_URI", "mongodb://u:hunter2@h/")
	err = start("-mongo-uri-file", file)
	require.EqualError(t, err, "set DCM_MONGO_URI or DCM_MONGO_URI_FILE, not both")
}

// TestStoreForNamesTheKeyring: a program whose keyring has no key for its
// service stops at start, naming the setting to fix.
func TestStoreForNamesTheKeyring(t *testing.T) {
	t.Parallel()
	root, err := secrets.ParseKeyring(secrets.NewKeyLine("k1"))
	require.NoError(t, err)
	rsync, err := root.For("rsync")
	require.NoError(t, err)
	k, err := secrets.ParseKeyring(rsync.Lines())
	require.NoError(t, err)
	st, err := store.Open(store.Config{Database: "dcm", DataDir: t.TempDir(), Keyring: k}, zap.NewNop())
	require.NoError(t, err)
	defer st.Close(context.Background())
	env := &app.Env{Config: server.Config{KEKFile: "/etc/dcm/kek/keyring"}, Store: st}

	_, err = env.StoreFor("rsync")
	require.NoError(t, err)
	_, err = env.StoreFor("quota")
	require.ErrorContains(t, err, "quota: keyring DCM_KEK_FILE /etc/dcm/kek/keyring: no key for service quota")
	_, err = (&app.Env{}).StoreFor("quota")
	require.ErrorContains(t, err, "no store")
}
