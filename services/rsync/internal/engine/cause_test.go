package engine_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// TestCause: what tenants read of a cluster's error names no address and
// keeps the API server's answer and rsync's own refusals.
func TestCause(t *testing.T) {
	t.Parallel()
	dial := func(errno error) error {
		return &url.Error{Op: "Get", URL: "https://10.1.2.3:6443/api?timeout=20s", Err: &net.OpError{
			Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 6443}, Err: os.NewSyscallError("connect", errno)}}
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{dial(syscall.ECONNREFUSED), "unreachable: connection refused"},
		{fmt.Errorf("apply: %w", dial(syscall.EHOSTUNREACH)), "unreachable: no route to the API server"},
		{&url.Error{Op: "Get", URL: "https://[fd00::1]:6443/api", Err: context.DeadlineExceeded}, "unreachable: timed out"},
		{apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "a", errors.New("no")), `namespaces "a" is forbidden: no`},
		{apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, "robot"), `serviceaccounts "robot" not found`},
		{engine.Terminal(errors.New(`Namespace "a" is managed by lc/p/x: refused`)), `Namespace "a" is managed by lc/p/x: refused`},
		{apierrors.NewInternalError(errors.New(`failed calling webhook "w": Post "https://w.ns.svc:443/v?t=1": dial tcp 10.96.0.5:443: i/o timeout`)),
			`Internal error occurred: failed calling webhook "w": Post "<address>": dial tcp <address>: i/o timeout`},
		{errors.New("proxy [fe80::1%eth0]:8080 said no"), "proxy <address> said no"},
	} {
		got := engine.Cause(tc.err)
		require.Equal(t, tc.want, got, "%v", tc.err)
		require.NotContains(t, got, "10.1.2.3")
	}
}
