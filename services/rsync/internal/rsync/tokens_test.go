package rsync

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/dcm-project/dcm/platform/errs"
)

// TestTokenAllowed: the traffic program gets tokens of its own rollouts'
// ServiceAccounts only; core (and the all-in-one program) of any DCM applied.
func TestTokenAllowed(t *testing.T) {
	for _, tc := range []struct {
		peer, owner string
		want        codes.Code
	}{
		{"traffic", "traffic/p/rb/v1/g", codes.OK},
		{"traffic", "lc/p/lc1", codes.PermissionDenied},
		{"traffic", "mesh/edge/c1", codes.PermissionDenied},
		{"traffic", "trafficker/x", codes.PermissionDenied},
		{"core", "lc/p/lc1", codes.OK},
		{"dcm", "lc/p/lc1", codes.OK},
	} {
		err := tokenAllowed(tc.peer, tc.owner, "ServiceAccount ns/sa")
		require.Equal(t, tc.want, errs.Code(err), "%s asking for a ServiceAccount of %s: %v", tc.peer, tc.owner, err)
	}
}
