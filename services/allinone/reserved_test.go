package allinone_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// TestReservedAddOnNamespaces: with the default settings no logical cloud
// may take the namespace of a common cluster add-on (an ingress
// controller, cert-manager, monitoring, GitOps, policy...), in either body
// shape and even for an admin; names that only look alike stay free.
func TestReservedAddOnNamespaces(t *testing.T) {
	t.Parallel()
	r := apitest.NewREST(t, stacktest.Start(t))
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"p1"}}`)
	base := "/v2/projects/p1/logical-clouds"
	for _, ns := range []string{"ingress-nginx", "cert-manager", "monitoring", "argocd", "flux-system", "metallb-system",
		"gatekeeper-system", "istio-system", "kyverno", "external-secrets", "velero", "openshift-monitoring", "cilium-secrets"} {
		body := r.Want(400, "POST", base, `{"metadata":{"name":"lc"},"spec":{"namespace":"`+ns+`"}}`)
		require.Contains(t, body, `"field":"spec.namespace"`, ns)
		require.Contains(t, body, ns, ns)
		r.Want(404, "GET", base+"/lc", "")
		require.Contains(t, r.Want(400, "POST", base, `{"name":"`+ns+`"}`), `"field":"name"`, ns)
		r.Want(404, "GET", base+"/"+ns, "")
	}
	r.Want(201, "POST", base, `{"metadata":{"name":"lc"},"spec":{"namespace":"monitoring-team-a"}}`)
	r.Want(201, "POST", base, `{"name":"my-argocd"}`)
}
