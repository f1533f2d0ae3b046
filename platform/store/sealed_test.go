package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/secrets"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

const pemKey = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIAb3nN0tAsEcReT\n-----END EC PRIVATE KEY-----\n"

func openAt(t *testing.T, dir, keyring string) (*store.Store, *store.Records[*structpb.Struct]) {
	t.Helper()
	k, err := secrets.ParseKeyring(keyring)
	require.NoError(t, err)
	s, err := store.Open(store.Config{Database: "sealed", DataDir: dir, Keyring: k}, zap.NewNop())
	require.NoError(t, err)
	return s, store.NewRecords(s, "keys", "key", func() *structpb.Struct { return &structpb.Struct{} })
}

// TestSecretsSealedAndRotated follows a value from Create to a key rotation:
// never in clear in the store's files, readable only through Secret,
// carried over by updates, and still readable after the old key is dropped.
func TestSecretsSealedAndRotated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	k1, k2 := secrets.NewKeyLine("k1"), secrets.NewKeyLine("k2")

	s, recs := openAt(t, dir, k1)
	body := newStruct(t, map[string]any{"fingerprint": "sha256:ab"})
	require.NoError(t, recs.Create(ctx, "a", "", body, store.Secret{Name: "key", Value: []byte(pemKey)}))
	require.NoError(t, recs.Create(ctx, "plain", "", body))
	got, err := recs.Secret(ctx, "a", "key")
	require.NoError(t, err)
	require.Equal(t, pemKey, string(got))
	_, err = recs.Secret(ctx, "plain", "key")
	require.Equal(t, codes.NotFound, code(err))

	v, err := recs.Get(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, recs.Update(ctx, "a", v.Version, newStruct(t, map[string]any{"fingerprint": "sha256:cd"})))
	got, err = recs.Secret(ctx, "a", "key")
	require.NoError(t, err)
	require.Equal(t, pemKey, string(got), "an update without secrets keeps them")

	v, err = recs.Get(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, recs.Update(ctx, "a", v.Version, v.Msg, store.Secret{Name: "other", Value: []byte("x")}))
	got, err = recs.Secret(ctx, "a", "key")
	require.NoError(t, err)
	require.Equal(t, pemKey, string(got), "an update of one secret keeps the others")
	s.Close(ctx)
	require.True(t, storetest.FilesContain(t, dir, []byte("sha256:cd")), "the scan sees what is stored in clear")
	require.False(t, storetest.FilesContain(t, dir, []byte("PRIVATE KEY")), "a private key in clear in the store's files")
	require.False(t, storetest.FilesContain(t, dir, []byte("MHcCAQEEIAb3nN0tAsEcReT")))

	// Rotate: k2 first, k1 kept to open; rewrap; then k2 alone.
	s, _ = openAt(t, dir, k2+k1)
	res, err := s.Rewrap(ctx)
	require.NoError(t, err)
	require.Equal(t, store.Rewrapped{KeyID: "k2", Records: 1, Values: 2}, res)
	res, err = s.Rewrap(ctx)
	require.NoError(t, err)
	require.Equal(t, store.Rewrapped{KeyID: "k2", Unchanged: 2}, res, "a second rewrap has nothing to do")
	s.Close(ctx)

	s, recs = openAt(t, dir, k2)
	defer s.Close(ctx)
	got, err = recs.Secret(ctx, "a", "key")
	require.NoError(t, err)
	require.Equal(t, pemKey, string(got))
}

// TestSecretNeedsItsKey: a value whose key-encryption key is gone is an
// error that names no secret material, never a wrong value.
func TestSecretNeedsItsKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, recs := openAt(t, dir, secrets.NewKeyLine("k1"))
	require.NoError(t, recs.Create(ctx, "a", "", newStruct(t, nil), store.Secret{Name: "key", Value: []byte(pemKey)}))
	s.Close(ctx)

	s, recs = openAt(t, dir, secrets.NewKeyLine("k2"))
	defer s.Close(ctx)
	_, err := recs.Secret(ctx, "a", "key")
	require.Equal(t, codes.Internal, code(err))
	require.NotContains(t, err.Error(), "PRIVATE")
	_, err = s.Rewrap(ctx)
	require.Equal(t, codes.FailedPrecondition, code(err))
}
