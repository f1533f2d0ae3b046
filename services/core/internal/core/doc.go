// Package core implements the core service: projects (Projects), logical
// clouds with their cluster references and key-value pairs, their
// lifecycle (apply, update, stop, terminate, status), kubeconfigs and
// quota usage (LogicalClouds), and the token service that mints, revokes
// and checks the REST gateway's bearer tokens (Tokens).
//
// Core tells, the services below never ask back: at apply it sends the
// namespace, quota and user services what it read of the logical cloud,
// hands the manifests they render to rsync as one rollout, and tells rsync
// which clusters its logical clouds hold. It reaches other services only
// through their generated gRPC clients, and must not import their code.
package core
