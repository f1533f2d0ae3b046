//go:build tools

// Package istio pins Istio's istiod (pilot-discovery) for the tests that run it
// out of cluster (platform/kubetest/istiotest), and pilot-discovery and
// pilot-agent for the images make images builds of them (docs/images.md). This module is kept out of the
// product's go.work so that Istio's dependency graph never upgrades the
// product's (k8s.io, grpc): see docs/mesh.md.
package istio

import (
	_ "istio.io/istio/pilot/cmd/pilot-agent"
	_ "istio.io/istio/pilot/cmd/pilot-discovery"
)
