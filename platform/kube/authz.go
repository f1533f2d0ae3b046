package kube

// DenyAllPrincipal is a SPIFFE ID that no certificate DCM's CAs sign can
// carry: its trust domain is under .invalid (RFC 2606), DCM's are under
// .dcm.local (docs/mesh.md).
const DenyAllPrincipal = "deny-all.dcm.invalid/ns/none/sa/none"

// DenyAllPolicySpec is the spec of an Istio AuthorizationPolicy that lets
// no request in: an ALLOW policy whose one rule names DenyAllPrincipal,
// so that a workload it selects takes only what another ALLOW policy
// names (Istio allows what any ALLOW policy matches). Istio reads an
// empty spec the same way for Envoy, but its proxyless gRPC generator
// builds a workload's RBAC filter from rules only: a rule-less policy
// gave proxyless servers no filter, and they took every call.
func DenyAllPolicySpec() map[string]any {
	return map[string]any{
		"action": "ALLOW",
		"rules": []any{map[string]any{
			"from": []any{map[string]any{"source": map[string]any{"principals": []any{DenyAllPrincipal}}}},
		}},
	}
}
