// Package images builds DCM's container images without a registry or a
// container engine: one OCI image per program (the all-in-one dcm, each
// service, the gateway), Kubernetes' sandbox image pause compiled from the
// pinned k8s.io/kubernetes module's build/pause/linux/pause.c, and
// Kubernetes' e2e helper agnhost built from the same module. Each image is
// written as an OCI image-layout tarball that `ctr images import` loads
// under its names (the index's io.containerd.image.name annotations).
//
// It is a tools module, outside go.work, so that go-containerregistry's
// dependencies never change the versions the product builds with (as
// test/k8s and test/istio keep Kubernetes' and Istio's out). It must not
// push or pull anything: every input is built on this machine.
package images
