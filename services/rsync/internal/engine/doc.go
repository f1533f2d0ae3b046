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
// One file per concern: engine.go (state, load), reconcile.go (what each
// task must do), worker.go (a goroutine per cluster, the concurrency
// bound, sleeping until due), pass.go and step.go (doing it),
// statuswriter.go (the single store writer of cluster states, with its own
// lock), owner.go (ownership), api.go (what the gRPC API calls).
package engine
