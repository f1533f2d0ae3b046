package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/secrets"
)

// TestNewAndDerive: a new key line parses; derive prints the service's
// keys, which are the ones the program derives itself from the root.
func TestNewAndDerive(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.NoError(t, run([]string{"new", "-id", "k2"}, nil, &out))
	require.True(t, strings.HasPrefix(out.String(), "k2:"))
	rootText := out.String() + secrets.NewKeyLine("k1")

	out.Reset()
	require.NoError(t, run([]string{"derive", "-service", "rsync"}, strings.NewReader(rootText), &out))
	root, err := secrets.ParseKeyring(rootText)
	require.NoError(t, err)
	want, err := root.For("rsync")
	require.NoError(t, err)
	require.Equal(t, "# keys of service rsync, the first one current\n"+want.Lines(), out.String())
	require.NotContains(t, out.String(), strings.SplitN(rootText, "\n", 2)[0], "no root key in the output")

	require.Error(t, run([]string{"derive"}, strings.NewReader(rootText), &out))
	require.Error(t, run([]string{"new", "-id", "bad id"}, nil, &out))
	require.Error(t, run([]string{"rotate"}, nil, &out))
}
