// Package cadist implements the CA distribution service: root CAs
// (generated in the background by Run, or imported with their issuers and
// key) and, per logical cloud and cluster, the intermediate CA that
// cluster's istiod signs workload certificates with: path length 0, no
// extended key usage, name-constrained to the logical cloud's trust
// domain. It answers the public bundles (CaDistService, on REST) and the
// intermediates with their keys (CaDistInternalService, gRPC only, for the
// service mesh service), and rotates a logical cloud's intermediates with
// an overlap in which both roots are trusted (docs/mesh.md section 6).
//
// It must not answer a private key on the public service, log one, or
// quote one in an error; keys are sealed at rest (store.Secret) with the
// service's own key. It calls no other service: the service mesh service
// tells it the clusters and trust domain, core tells it to purge.
package cadist
