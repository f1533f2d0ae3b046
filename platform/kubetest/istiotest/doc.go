// Package istiotest runs Istio's real parts for tests: istiod
// (pilot-discovery, built from the tools module test/istio into bin/istio),
// Istio's CRDs (from the pinned istio.io/api module) on a kubetest cluster,
// a client for istiod's CA (CreateCertificate with a ServiceAccount
// token of audience istio-ca), and Istio's own config validation of
// rendered objects (Validate: istio-validate, built from test/istio like
// istiod).
//
// istiod runs as a local process against a kubetest cluster, "out of
// cluster": it reads the cacerts Secret and the istio-<revision> mesh
// ConfigMap from the cluster, as it would in a Pod with the chart's
// /etc/cacerts mount. The clusters have no nodes, so nothing here starts
// Envoy or proves sidecar injection (docs/mesh.md).
//
// It is a test harness: only tests, other harnesses and the listed tools
// may import it (make lint enforces it), never product code.
package istiotest
