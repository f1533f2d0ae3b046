// Package netcheck refuses addresses DCM must never send to on a caller's
// behalf, whatever the caller gives: cloud instance-metadata services and
// link-local addresses (a kubeconfig's server, a DNS provider's host). It
// reads the text only and never resolves or dials.
package netcheck

import (
	"net/netip"
	"strings"
)

// metadataNames are host names of cloud instance-metadata services. A
// kubeconfig naming one would send the cluster's credentials to the
// machine's own metadata endpoint (and what it answers back to the caller).
var metadataNames = map[string]bool{
	"metadata":                     true,
	"metadata.google.internal":     true,
	"metadata.goog":                true,
	"metadata.azure.com":           true,
	"instance-data":                true,
	"instance-data.ec2.internal":   true,
	"metadata.tencentyun.com":      true,
	"metadata.platformequinix.com": true,
}

// metadataAddrs are instance-metadata addresses outside the link-local
// ranges (which are refused whole).
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("fd00:ec2::254"),   // AWS, IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
}

// ForbiddenHost says why host is never a server DCM sends to on a
// caller's behalf (a cluster's API server, a DNS provider): a cloud
// metadata service, a link-local, unspecified or multicast address, or a
// numeric form a resolver might read as one; "" when it is none of these.
// It looks at the text only: nothing is resolved or dialed.
func ForbiddenHost(host string) string {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if metadataNames[name] {
		return "is a cloud metadata service"
	}
	if a, err := netip.ParseAddr(name); err == nil {
		a = a.WithZone("").Unmap()
		switch {
		case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
			return "is a link-local address (169.254.0.0/16, fe80::/10)"
		case a.IsUnspecified() || a.IsMulticast():
			return "is not a unicast address"
		}
		for _, m := range metadataAddrs {
			if a == m {
				return "is a cloud metadata service"
			}
		}
		return ""
	}
	// No top-level domain is numeric: "2852039166", "0xa9fea9fe" or
	// "169.254.43518" are IPv4 addresses in forms some resolvers accept.
	last := name[strings.LastIndex(name, ".")+1:]
	if last != "" && strings.Trim(last, "0123456789") == "" || strings.HasPrefix(last, "0x") {
		return "is an address in a non-standard numeric form: write it in dotted decimal"
	}
	return ""
}
