package netcheck_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/netcheck"
)

func TestForbiddenHost(t *testing.T) {
	for host, forbidden := range map[string]bool{
		"169.254.169.254":           true,
		"fe80::1":                   true,
		"fe80::1%eth0":              true,
		"metadata.google.internal":  true,
		"METADATA.google.internal.": true,
		"fd00:ec2::254":             true,
		"100.100.100.200":           true,
		"::ffff:169.254.169.254":    true,
		"0.0.0.0":                   true,
		"224.0.0.1":                 true,
		"2852039166":                true,
		"0xa9fea9fe":                true,
		"169.254.43518":             true,
		"ns1.example.com":           false,
		"192.0.2.53":                false,
		"10.0.0.53":                 false,
		"127.0.0.1":                 false,
		"2001:db8::53":              false,
	} {
		why := netcheck.ForbiddenHost(host)
		require.Equal(t, forbidden, why != "", "%s: %q", host, why)
	}
}
