package rsync

import (
	"net/netip"
	"net/url"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dcm-project/dcm/platform/errs"
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

// checkEndpoints refuses the endpoints of a kubeconfig's cluster that would
// send its credentials in clear or to somewhere other than the cluster:
// plain http://, insecure-skip-tls-verify and proxy-url unless the admin set
// allow-insecure, and link-local or metadata addresses always. It looks at
// the text only: nothing is resolved or dialed, so a name that resolves to
// such an address is not caught here (the host's network policy is the
// place for that).
func checkEndpoints(cl *clientcmdapi.Cluster, allowInsecure bool) error {
	const field = "cluster.spec.kubeconfig"
	server := cl.Server
	if !strings.Contains(server, "://") {
		server = "https://" + server // client-go's reading of a bare host:port
	}
	u, err := url.Parse(server)
	if err != nil || u.Host == "" {
		return errs.Invalid(field, "server is not an https:// URL with a host")
	}
	if why := forbiddenHost(u.Hostname()); why != "" {
		return errs.Invalid(field, "server %s: %s", u.Host, why)
	}
	if cl.ProxyURL != "" {
		p, err := url.Parse(cl.ProxyURL)
		if err != nil || p.Host == "" {
			return errs.Invalid(field, "proxy-url is not a URL with a host")
		}
		if why := forbiddenHost(p.Hostname()); why != "" {
			return errs.Invalid(field, "proxy-url %s: %s", p.Host, why)
		}
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return errs.Invalid(field, "server must be an https:// URL, not %s://", u.Scheme)
	case allowInsecure:
		return nil
	case u.Scheme == "http":
		return errs.Invalid(field, "server is plain http://, which sends the cluster's credentials in clear: use https://, or set spec.allow-insecure to accept it")
	case cl.InsecureSkipTLSVerify:
		return errs.Invalid(field, "insecure-skip-tls-verify sends the cluster's credentials to whoever answers: give certificate-authority-data, or set spec.allow-insecure to accept it")
	case cl.ProxyURL != "":
		return errs.Invalid(field, "proxy-url sends the cluster's traffic through a third party: remove it, or set spec.allow-insecure to accept it")
	}
	return nil
}

// forbiddenHost says why host is never a cluster's (a link-local or
// metadata address, a numeric form a resolver might read as one), or "".
func forbiddenHost(host string) string {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if metadataNames[name] {
		return "is a cloud metadata service, never a cluster"
	}
	if a, err := netip.ParseAddr(name); err == nil {
		a = a.WithZone("").Unmap()
		switch {
		case a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast():
			return "is a link-local address (169.254.0.0/16, fe80::/10), never a cluster"
		case a.IsUnspecified() || a.IsMulticast():
			return "is not a unicast address"
		}
		for _, m := range metadataAddrs {
			if a == m {
				return "is a cloud metadata service, never a cluster"
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
