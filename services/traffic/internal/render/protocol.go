package render

import (
	"strconv"
	"strings"

	"github.com/dcm-project/dcm/platform/errs"
)

// family is how a protocol is routed: by HTTP host (HTTP, HTTP2, GRPC),
// by TLS SNI (HTTPS, TLS) or by port alone (TCP, MONGO).
type family int

const (
	familyHTTP family = iota
	familyTLS
	familyTCP
)

// protocols are the Istio port protocols an intent may name, and their
// family.
var protocols = map[string]family{
	"HTTP": familyHTTP, "HTTP2": familyHTTP, "GRPC": familyHTTP,
	"HTTPS": familyTLS, "TLS": familyTLS,
	"TCP": familyTCP, "MONGO": familyTCP,
}

// protocol normalises p (case-insensitive; empty: def) and refuses what
// Istio does not route.
func protocol(field, p, def string) (string, error) {
	if p == "" {
		p = def
	}
	up := strings.ToUpper(p)
	if _, ok := protocols[up]; !ok {
		return "", errs.Invalid(field, "protocol %q is none of HTTP, HTTPS, HTTP2, GRPC, TCP, TLS, MONGO", p)
	}
	return up, nil
}

func familyOf(p string) family { return protocols[p] }

// portName is an Istio port name: the protocol's prefix (which tells Istio
// the protocol) and the number.
func portName(proto string, port int32) string {
	return strings.ToLower(proto) + "-" + strconv.Itoa(int(port))
}

// checkPort refuses a port outside 1-65535.
func checkPort(field string, port int32) error {
	if port < 1 || port > 65535 {
		return errs.Invalid(field, "port %d is not 1-65535", port)
	}
	return nil
}

// defaultPort is an external service's port when the intent gives none:
// 80 for HTTP, 443 for TLS; TCP has none.
func defaultPort(proto string) int32 {
	switch familyOf(proto) {
	case familyHTTP:
		return GatewayHTTPPort
	case familyTLS:
		return GatewayTLSPort
	default:
		return 0
	}
}
