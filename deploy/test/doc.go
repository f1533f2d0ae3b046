// Package deploytest holds the tests of deploy/: each kustomize overlay is
// built with the kustomize Go API, checked against the programs' code
// (their settings, ports, callers) and applied with server-side dry-run
// to a real test cluster. It has no code of its own and must not be
// imported; it is a module of its own so that kustomize's dependencies stay
// out of the programs' modules.
package deploytest
