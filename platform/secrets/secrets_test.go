package secrets

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSealOpenRewrap(t *testing.T) {
	t.Parallel()
	k1 := NewKeyLine("k1")
	old, err := ParseKeyring(k1)
	require.NoError(t, err)
	secret := []byte("-----BEGIN EC PRIVATE KEY-----\nabc\n-----END EC PRIVATE KEY-----\n")
	aad := []byte("clusters/a/kubeconfig")

	s, err := old.Seal(secret, aad)
	require.NoError(t, err)
	require.Equal(t, "k1", s.KeyID)
	require.False(t, bytes.Contains(s.Ciphertext, []byte("PRIVATE KEY")))
	got, err := old.Open(s, aad)
	require.NoError(t, err)
	require.Equal(t, secret, got)

	s2, err := old.Seal(secret, aad)
	require.NoError(t, err)
	require.NotEqual(t, s.Ciphertext, s2.Ciphertext, "a fresh data key and nonce per value")

	_, err = old.Open(s, []byte("clusters/b/kubeconfig"))
	require.Error(t, err, "a value moved to another record must not open")

	rotated, err := ParseKeyring(NewKeyLine("k2") + k1)
	require.NoError(t, err)
	require.Equal(t, "k2", rotated.Current())
	r, changed, err := rotated.Rewrap(s)
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, "k2", r.KeyID)
	require.Equal(t, s.Ciphertext, r.Ciphertext, "rewrap leaves the ciphertext alone")
	_, changed, err = rotated.Rewrap(r)
	require.NoError(t, err)
	require.False(t, changed)

	onlyNew, err := ParseKeyring(NewKeyLine("k2"))
	require.NoError(t, err)
	_, err = onlyNew.Open(r, aad)
	require.Error(t, err, "another key named k2 must not unwrap")
	_, err = onlyNew.Open(s, aad)
	require.True(t, errors.Is(err, ErrUnknownKey))
	require.NotContains(t, err.Error(), "PRIVATE")
}

func TestParseKeyringErrors(t *testing.T) {
	t.Parallel()
	for name, text := range map[string]string{
		"empty":      "",
		"comments":   "# nothing\n\n",
		"no colon":   "k1",
		"bad id":     "k 1:" + strings.TrimPrefix(NewKeyLine("x"), "x:"),
		"short key":  "k1:AAAA",
		"not base64": "k1:!!!!",
		"duplicate":  NewKeyLine("k1") + NewKeyLine("k1"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseKeyring(text)
			require.Error(t, err)
		})
	}
}

// TestServiceKeys: each service seals under keys of its own, which another
// service's keyring does not hold; values sealed under a root key still
// open and are moved to the service's key by Rewrap; a keyring of derived
// lines alone (what a service's Deployment gets) opens the service's values.
func TestServiceKeys(t *testing.T) {
	t.Parallel()
	root, err := ParseKeyring(NewKeyLine("k2") + NewKeyLine("k1"))
	require.NoError(t, err)
	aad := []byte("clusters/a/kubeconfig")
	secret := []byte("kubeconfig with client-key-data")

	rsync, err := root.For("rsync")
	require.NoError(t, err)
	require.Equal(t, "k2@rsync", rsync.Current())
	again, err := root.For("rsync")
	require.NoError(t, err)
	require.Equal(t, rsync.Lines(), again.Lines(), "derivation is deterministic")
	require.Equal(t, "k2", RootID(rsync.Current()))

	s, err := rsync.Seal(secret, aad)
	require.NoError(t, err)
	require.Equal(t, "k2@rsync", s.KeyID)
	quota, err := root.For("quota")
	require.NoError(t, err)
	_, err = quota.Open(s, aad)
	require.ErrorIs(t, err, ErrUnknownKey, "quota's keyring must not open rsync's value")
	require.NotContains(t, err.Error(), "client-key-data")

	legacy, err := root.Seal(secret, aad)
	require.NoError(t, err)
	require.Equal(t, "k2", legacy.KeyID)
	got, err := rsync.Open(legacy, aad)
	require.NoError(t, err, "a value sealed under the root key still opens")
	require.Equal(t, secret, got)
	moved, changed, err := rsync.Rewrap(legacy)
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, "k2@rsync", moved.KeyID)

	lines := rsync.Lines()
	require.Equal(t, 2, strings.Count(lines, "\n"))
	require.True(t, strings.HasPrefix(lines, "k2@rsync:"), lines)
	require.Contains(t, lines, "\nk1@rsync:")
	own, err := ParseKeyring("# rsync only\n" + lines)
	require.NoError(t, err)
	ownRsync, err := own.For("rsync")
	require.NoError(t, err)
	require.Equal(t, "k2@rsync", ownRsync.Current())
	got, err = ownRsync.Open(moved, aad)
	require.NoError(t, err, "the derived lines alone open the service's values")
	require.Equal(t, secret, got)
	_, err = ownRsync.Open(legacy, aad)
	require.ErrorIs(t, err, ErrUnknownKey, "without the root, a value not yet rewrapped does not open")

	_, err = own.For("quota")
	require.ErrorContains(t, err, "no key for service quota")
	_, err = ownRsync.For("quota")
	require.Error(t, err)
	_, err = root.For("a@b")
	require.Error(t, err)
}
