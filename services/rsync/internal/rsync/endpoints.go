package rsync

import (
	"net/url"
	"strings"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/netcheck"
)

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
	if why := netcheck.ForbiddenHost(u.Hostname()); why != "" {
		return errs.Invalid(field, "server %s: %s", u.Host, why)
	}
	if cl.ProxyURL != "" {
		p, err := url.Parse(cl.ProxyURL)
		if err != nil || p.Host == "" {
			return errs.Invalid(field, "proxy-url is not a URL with a host")
		}
		if why := netcheck.ForbiddenHost(p.Hostname()); why != "" {
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
