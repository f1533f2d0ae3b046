//go:build tools

// Package kuberouter pins kube-router, the NetworkPolicy implementation the
// test clusters' nodes run (only its firewall: --run-firewall; routing and
// the service proxy stay off, kube-proxy is the cluster's proxy). It is a
// tools module, outside the product's go.mod and go.work: build with
// `GOWORK=off go build github.com/cloudnativelabs/kube-router/v2/cmd/kube-router`.
package kuberouter

import (
	_ "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
)
