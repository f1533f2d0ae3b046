package allinone_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/config"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/allinone"
	"github.com/dcm-project/dcm/services/gateway"
	"github.com/dcm-project/dcm/services/namespace"
	"github.com/dcm-project/dcm/services/quota"
	"github.com/dcm-project/dcm/services/traffic"
	"github.com/dcm-project/dcm/services/user"
)

// TestChildrenTakeNoCoreAddr: the namespace, user, quota and traffic
// programs hold no client of core, and their configuration has no core
// address: DCM_CORE_ADDR is ignored as any unknown DCM_ variable is, and
// -core-addr refused as any unknown flag is. The gateway and the all-in-one
// program take it.
func TestChildrenTakeNoCoreAddr(t *testing.T) {
	t.Setenv("DCM_CORE_ADDR", "core.example:9090")
	for _, name := range []string{namespace.Name, user.Name, quota.Name, traffic.Name} {
		var cfg server.Config
		require.NoError(t, config.Load(&cfg, name, nil), name)
		require.Empty(t, cfg.CoreAddr, name)
		require.NotContains(t, config.DumpFor(&cfg, name), "DCM_CORE_ADDR", name)
		unknown := config.Load(&cfg, name, []string{"-no-such-addr", "h:1"})
		require.Error(t, unknown, name)
		err := config.Load(&cfg, name, []string{"-core-addr", "h:1"})
		require.EqualError(t, err, strings.ReplaceAll(unknown.Error(), "no-such-addr", "core-addr"), name)
	}
	for _, name := range []string{gateway.Name, allinone.Name} {
		var cfg server.Config
		require.NoError(t, config.Load(&cfg, name, nil), name)
		require.Equal(t, "core.example:9090", cfg.CoreAddr, name)
	}
}
