package kube

import (
	"fmt"
	"net/netip"
)

// CheckIP checks an address that DCM writes into a manifest (a cluster
// reference's loadbalancer-ip): an IPv4 or IPv6 address as netip parses it,
// without an IPv6 zone ("fe80::1%eth0"). A zone may hold any text,
// quotes and newlines included, and has no meaning off the host that
// named it. It answers the address in its canonical form.
func CheckIP(s string) (string, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "", fmt.Errorf("%q is not an IP address", s)
	}
	if a.Zone() != "" {
		return "", fmt.Errorf("%q carries an IPv6 zone: give the address without %%zone", s)
	}
	return a.String(), nil
}
