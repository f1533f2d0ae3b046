// Package core implements the core service: projects (Projects), logical
// clouds (LogicalClouds, composed of one type per job: Clouds,
// ControlPlanes, Lifecycle, References, Kubeconfigs, QuotaUsage, Facts,
// with Meshes and TrafficRollouts beside them), and the token service that
// mints, revokes and checks the REST gateway's bearer tokens (Tokens). No
// type declares more than 25 methods (platform/typesize's TestEveryTypeStaysSmall).
//
// Core tells, the services below never ask back: at apply it sends the
// namespace, quota and user services what it read of the logical cloud,
// hands the manifests they render to rsync as one rollout, and tells rsync
// which clusters its logical clouds hold. It reaches other services only
// through their generated gRPC clients, and must not import their code.
package core
