// Package engine is the resource synchronizer's engine: it makes each
// owner's desired state (per cluster, an ordered list of Kubernetes
// manifests) true on every cluster, with server-side apply, a worker per
// cluster under a global concurrency bound, capped exponential backoff with
// jitter for retryable errors, and a CSR approval step. Desired state and
// observed status live in the store; status writes are coalesced (a few
// per cluster per rollout) and a restart resumes from them.
//
// One owner per object on a cluster: every object it applies is stamped
// with its owner (the annotation dcm.io/owner) and applied under the
// owner's own field manager; an object another owner manages, or one DCM
// did not create, is never changed nor deleted (owner.go, step.go).
//
// It talks to clusters only through the Cluster interface: client-go for
// real clusters (Kube), an in-process stand-in for benchmarks (Simulated);
// conformance_test.go runs the same behaviours against both. It must not
// know about logical clouds or any other service.
//
// One type per part, each holding only what it uses (docs/rsync.md,
// "Parts"): Engine (engine.go) builds them and starts their loops; api
// (api.go: what the gRPC API calls), replicas (replicas.go, purge.go: the
// rollouts in step with the store and the other replicas), shards
// (shards.go: the leases), applier (worker.go, reconcile.go, pass.go,
// step.go: applying), driftWatcher (driftwatch.go, driftrecord.go),
// stager (stages.go: the waves of progressive rollouts) and statusWriter
// (statuswriter.go, trace.go: saving cluster states). They
// share the in-memory state on a board, under its lock.
package engine
