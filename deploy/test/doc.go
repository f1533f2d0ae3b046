// Package deploytest holds the tests of deploy/: each kustomize overlay is
// built with the kustomize Go API, checked against the programs' code
// (their settings, ports, callers) and applied with server-side dry-run
// to a real test cluster, and the dev overlay runs on a cluster with a
// node and drives another (cluster_test.go). It has no code of its own and
// must not be imported; its package certs (and cmd/dcm-certs) writes the
// Secrets of cert-manager's Certificates where cert-manager's controller
// does not run. It is a module of its own so that kustomize's dependencies
// stay out of the programs' modules.
package deploytest
