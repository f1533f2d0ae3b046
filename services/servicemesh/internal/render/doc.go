// Package render turns a logical cloud's service mesh into Kubernetes
// objects per cluster with Istio's own Helm charts (istio-discovery for
// istiod, gateway for the east-west, ingress and egress gateways) from the
// pinned istio.io/istio module, rendered in process by the Helm v4 engine,
// plus the few objects DCM adds around them (the istio namespace, the
// cacerts Secret, the cross-network Gateway, the revision claim), and
// narrows what they may do on a shared cluster: the charts' ClusterRoles
// rewritten and istiod's Roles (rbac.go), NetworkPolicies (netpol.go), a
// ResourceQuota and LimitRange (quota.go). Its CRD
// list is Istio's and external-dns's DNSEndpoint (a copy made by
// `make generate`).
//
// It is pure: it must not call any service or cluster, and the same input
// must give the same bytes (golden files, and rsync applies only what
// changed).
package render
