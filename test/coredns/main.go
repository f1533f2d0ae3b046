// Command coredns is CoreDNS, from its pinned module, with the plugins a
// test cluster's cluster DNS needs (kubernetes, forward, cache, errors,
// health, ready, loop, log): the Corefile of platform/kubetest/dns.go. It is
// a tools module, outside the product's go.mod and go.work: build with
// `GOWORK=off go build -o ../../bin/k8s/coredns .` (make coredns), and
// `make coredns` makes its image dcm.local/coredns:latest (docs/images.md).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The plugins, in the order CoreDNS's plugin.cfg runs them.
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// directives is the order the plugins run in: CoreDNS's own plugin.cfg,
// reduced to these (dnsserver.Directives must name every plugin used).
var directives = []string{
	"reload", "ready", "health", "errors", "log", "loop", "cache", "kubernetes", "forward",
}

func main() {
	dnsserver.Directives = directives
	coremain.Run()
}
