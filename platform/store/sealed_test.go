package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
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

// keyIDOf is the key id stored beside secret 0 of record id.
func keyIDOf(t *testing.T, s *store.Store, coll, id string) string {
	t.Helper()
	var doc struct {
		Secrets []struct {
			KeyID string `bson:"key_id"`
		} `bson:"secrets"`
	}
	require.NoError(t, s.Database().Collection(coll).FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Decode(&doc))
	require.NotEmpty(t, doc.Secrets)
	return doc.Secrets[0].KeyID
}

func openView(t *testing.T, s *store.Store, service string) *store.Records[*structpb.Struct] {
	t.Helper()
	v, err := s.For(service)
	require.NoError(t, err)
	return store.NewRecords(v, "clusters", "cluster", func() *structpb.Struct { return &structpb.Struct{} })
}

// TestServiceViews: a value sealed through one service's view does not
// open through another's; a value sealed before services had keys of
// their own (under the root key) opens and is moved to the service's key
// by Rewrap; after a rotation the service's new key alone, even given as
// its derived lines only, opens it.
func TestServiceViews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	k1, k2 := secrets.NewKeyLine("k1"), secrets.NewKeyLine("k2")

	// Before: stored through the root store, under k1 itself.
	s, _ := openAt(t, dir, k1)
	legacy := store.NewRecords(s, "clusters", "cluster", func() *structpb.Struct { return &structpb.Struct{} })
	require.NoError(t, legacy.Create(ctx, "edge/old", "edge", newStruct(t, nil), store.Secret{Name: "kubeconfig", Value: []byte(pemKey)}))
	s.Close(ctx)

	s, _ = openAt(t, dir, k1)
	rsync := openView(t, s, "rsync")
	require.NoError(t, rsync.Create(ctx, "edge/new", "edge", newStruct(t, nil), store.Secret{Name: "kubeconfig", Value: []byte(pemKey)}))
	require.Equal(t, "k1@rsync", keyIDOf(t, s, "clusters", "edge/new"))
	got, err := rsync.Secret(ctx, "edge/old", "kubeconfig")
	require.NoError(t, err, "a value under the root key opens through the view")
	require.Equal(t, pemKey, string(got))

	quota := openView(t, s, "quota")
	_, err = quota.Secret(ctx, "edge/new", "kubeconfig")
	require.Equal(t, codes.Internal, code(err), "quota's view must not open rsync's value")
	require.ErrorContains(t, err, "k1@rsync")
	require.NotContains(t, err.Error(), "PRIVATE")

	res, err := s.Rewrap(ctx)
	require.NoError(t, err)
	require.Equal(t, store.Rewrapped{KeyID: "k1", Records: 1, Values: 1, Unchanged: 1}, res, "the rsync view's collection is rewrapped with rsync's keys")
	require.Equal(t, "k1@rsync", keyIDOf(t, s, "clusters", "edge/old"))
	s.Close(ctx)

	// Rotate: k2 first; rewrap; then rsync's derived k2 line alone.
	s, _ = openAt(t, dir, k2+k1)
	openView(t, s, "rsync")
	res, err = s.Rewrap(ctx)
	require.NoError(t, err)
	require.Equal(t, store.Rewrapped{KeyID: "k2", Records: 2, Values: 2}, res)
	require.Equal(t, "k2@rsync", keyIDOf(t, s, "clusters", "edge/old"))
	s.Close(ctx)

	root, err := secrets.ParseKeyring(k2)
	require.NoError(t, err)
	own, err := root.For("rsync")
	require.NoError(t, err)
	s, _ = openAt(t, dir, own.Lines())
	defer s.Close(ctx)
	for _, id := range []string{"edge/old", "edge/new"} {
		got, err = openView(t, s, "rsync").Secret(ctx, id, "kubeconfig")
		require.NoError(t, err, "rsync's derived key alone opens %s", id)
		require.Equal(t, pemKey, string(got))
	}
	_, err = store.NewRecords(s, "clusters", "cluster", func() *structpb.Struct { return &structpb.Struct{} }).Secret(ctx, "edge/old", "kubeconfig")
	require.NoError(t, err, "the root view of a keyring of rsync's lines seals and opens with them")
	_, err = s.For("quota")
	require.ErrorContains(t, err, "no key for service quota")
}
