//go:build tools

// Package k8s pins the Kubernetes server binaries the test clusters run,
// kubectl, which the README's walkthrough uses on them, and the e2e helper
// agnhost, which `make images` puts in an image (test/images).
// It is a tools module, outside the product's go.mod and go.work: build
// with `GOWORK=off go build k8s.io/kubernetes/cmd/kube-apiserver`.
package k8s

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/images/agnhost"
)
