package user_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/config"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/user"
)

// TestCertLifetime: a week by default, DCM_CERT_LIFETIME changes it, and
// one the clusters' signers would not honour stops the service at start.
func TestCertLifetime(t *testing.T) {
	var cfg server.Config
	require.NoError(t, config.Load(&cfg, user.Name, nil))
	require.Equal(t, 168*time.Hour, cfg.CertLifetime)
	t.Setenv("DCM_CERT_LIFETIME", "30m")
	require.NoError(t, config.Load(&cfg, user.Name, nil))
	require.Equal(t, 30*time.Minute, cfg.CertLifetime)

	_, _, err := user.Build(context.Background(), &app.Env{Config: server.Config{CertLifetime: 5 * time.Minute}})
	require.EqualError(t, err, "user: DCM_CERT_LIFETIME: 5m0s is shorter than 10m0s, the shortest a cluster's signer issues")
}
