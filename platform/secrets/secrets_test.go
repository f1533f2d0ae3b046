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
