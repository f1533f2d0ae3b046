package config

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type sample struct {
	Addr    string        `env:"DCM_TEST_ADDR" flag:"addr" default:"127.0.0.1:1"`
	URI     string        `env:"DCM_TEST_URI" secret:"true"`
	Debug   bool          `env:"DCM_TEST_DEBUG" flag:"debug" default:"false"`
	Workers int           `env:"DCM_TEST_WORKERS" flag:"workers" default:"4"`
	Grace   time.Duration `env:"DCM_TEST_GRACE" flag:"grace" default:"5s"`
}

func TestLoadPrecedence(t *testing.T) {
	t.Setenv("DCM_TEST_ADDR", "127.0.0.1:2")
	t.Setenv("DCM_TEST_WORKERS", "8")
	t.Setenv("DCM_TEST_URI", "mongodb://u:pw@h/")
	var c sample
	require.NoError(t, Load(&c, "x", []string{"-workers", "16"}))
	require.Equal(t, "127.0.0.1:2", c.Addr, "env beats default")
	require.Equal(t, 16, c.Workers, "flag beats env")
	require.Equal(t, 5*time.Second, c.Grace)
	require.Equal(t, "mongodb://u:pw@h/", c.URI)
}

func TestDumpRedactsSecrets(t *testing.T) {
	c := sample{URI: "mongodb://user:hunter2@db/"}
	d := Dump(&c)
	require.NotContains(t, d, "hunter2")
	require.True(t, strings.Contains(d, Redacted), d)
	require.Contains(t, Dump(&sample{}), `"DCM_TEST_URI":""`, "an empty secret is shown empty")
}

func TestLoadRejectsBadValues(t *testing.T) {
	t.Setenv("DCM_TEST_WORKERS", "many")
	var c sample
	err := Load(&c, "x", nil)
	require.ErrorContains(t, err, "Workers")
}

func TestSecretsAreNotFlags(t *testing.T) {
	var c sample
	require.Error(t, Load(&c, "x", []string{"-uri", "mongodb://u:pw@h/"}), "no flag for a secret")
	var bad struct {
		Key string `env:"DCM_TEST_KEY" flag:"key" secret:"true"`
	}
	err := Load(&bad, "x", nil)
	require.ErrorContains(t, err, "Key: a secret setting cannot be a flag")
	require.ErrorContains(t, err, "DCM_TEST_KEY")
}

// TestLoadRefusesArguments: a word the program does not take is an error,
// not ignored (the program would otherwise start: "dcm version" must not
// serve), and -h shows each flag's default and environment variable.
func TestLoadRefusesArguments(t *testing.T) {
	var c sample
	err := Load(&c, "x", []string{"-workers", "2", "serve"})
	require.ErrorContains(t, err, `unexpected argument "serve"`)

	require.Contains(t, usage(t, &c), "(default 4; env DCM_TEST_WORKERS)")
	require.NotContains(t, usage(t, &c), "DCM_TEST_URI", "a secret is no flag")
}

// usage is what -h prints for cfg (the flag set writes it to stderr).
func usage(t *testing.T, cfg any) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stderr := os.Stderr
	os.Stderr = w
	err = Load(cfg, "x", []string{"-h"})
	os.Stderr = stderr
	require.NoError(t, w.Close())
	require.ErrorIs(t, err, flag.ErrHelp)
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(b)
}

// TestProgramsTag: a setting tagged programs is read by the programs it
// names; to another it is as unknown as a setting that does not exist: the
// variable ignored, the flag refused with the same error, the dump
// without it.
func TestProgramsTag(t *testing.T) {
	type cfg struct {
		Peer string `env:"DCM_TEST_PEER" flag:"peer" programs:"gw,all"`
		Addr string `env:"DCM_TEST_ADDR" flag:"addr"`
	}
	t.Setenv("DCM_TEST_PEER", "10.0.0.1:1")
	for _, name := range []string{"gw", "all"} {
		var c cfg
		require.NoError(t, Load(&c, name, nil))
		require.Equal(t, "10.0.0.1:1", c.Peer, name)
		require.NoError(t, Load(&c, name, []string{"-peer", "h:2"}))
		require.Equal(t, "h:2", c.Peer, name)
		require.Contains(t, DumpFor(&c, name), "DCM_TEST_PEER")
	}
	var c cfg
	require.NoError(t, Load(&c, "child", nil), "an unknown variable is ignored")
	require.Empty(t, c.Peer)
	require.NotContains(t, DumpFor(&c, "child"), "DCM_TEST_PEER")
	unknown := Load(&c, "child", []string{"-nosuch", "h:2"})
	require.Error(t, unknown)
	err := Load(&c, "child", []string{"-peer", "h:2"})
	require.EqualError(t, err, strings.ReplaceAll(unknown.Error(), "nosuch", "peer"), "refused as an unknown flag is")
}
