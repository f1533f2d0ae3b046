package allinone_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
)

// netpolLC is a standard logical cloud body whose user may read network
// policies and ConfigMaps; extra is more of its spec (JSON members).
func netpolLC(lc, ns, extra string) string {
	return fmt.Sprintf(`{"metadata": {"name": %q}, "spec": {"namespace": %q, %s "user": {"user-name": "u", "user-permissions": [
	  {"permission-name": "np", "apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["get", "list", "watch"]},
	  {"permission-name": "cm", "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "delete"]}]}}}`, lc, ns, extra)
}

// ingressFrom is what a dcm-ingress admits: the namespaces its peers name.
func ingressFrom(t testing.TB, np *networkingv1.NetworkPolicy) []string {
	t.Helper()
	require.Len(t, np.Spec.Ingress, 1, "one rule")
	var out []string
	for _, p := range np.Spec.Ingress[0].From {
		require.NotNil(t, p.NamespaceSelector, "peers are namespaces")
		require.Nil(t, p.PodSelector)
		out = append(out, p.NamespaceSelector.MatchLabels[kube.NamespaceNameLabel])
	}
	return out
}

// policies are DCM's NetworkPolicies in ns on cs, by name.
func policies(t testing.TB, cs *kubernetes.Clientset, ns string) map[string]*networkingv1.NetworkPolicy {
	t.Helper()
	list, err := cs.NetworkingV1().NetworkPolicies(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]*networkingv1.NetworkPolicy{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// TestNetworkPolicies: every standard logical cloud's namespace gets
// dcm-ingress (its own namespace; its Istio namespace when meshed; the
// namespaces spec.allow-ingress-from names, which an update brings to the
// cluster) and dcm-egress; spec.allow-ingress-from is checked on create and
// PUT (400 naming the entry, nothing stored; another project's logical
// cloud only by an admin, 403); a named logical cloud cannot be deleted;
// the tenant reads the policies but can neither change nor delete them,
// nor be granted to; after terminate none is left.
func TestNetworkPolicies(t *testing.T) {
	e := startTenants(t, "na", "nb")
	ctx := context.Background()
	c1, c2 := adminOf(t, e.H.Clusters[0]), adminOf(t, e.H.Clusters[1])
	pa := e.ProjectAdmin("na")
	lcs := "/v2/projects/na/logical-clouds"
	a, sib, b := lcs+"/a", lcs+"/sib", "/v2/projects/nb/logical-clouds/b"
	e.Admin.Want(201, "POST", "/v2/projects/nb/logical-clouds", netpolLC("b", "np-b", ""))
	pa.Want(201, "POST", lcs, netpolLC("sib", "np-sib", ""))

	t.Run("bad references are 400 or 403, naming the entry, with nothing stored", func(t *testing.T) {
		for _, c := range []struct {
			refs, field string
			code        int
			says        string
		}{
			{`["sib", "ghost"]`, "spec.allow-ingress-from[1]", 400, `no logical cloud \"ghost\" in project \"na\"`},
			{`["sib", "na/sib"]`, "spec.allow-ingress-from[1]", 400, `names \"sib\" twice`},
			{`["a"]`, "spec.allow-ingress-from[0]", 400, "the logical cloud itself"},
			{`["Not/A/Name"]`, "spec.allow-ingress-from[0]", 400, `\"Not/A/Name\" is not`},
			{`["nb/b"]`, "spec.allow-ingress-from[0]", 403, "only an admin"},
			{`["nb/ghost"]`, "spec.allow-ingress-from[0]", 403, "only an admin"},
		} {
			body := pa.Want(c.code, "POST", lcs, netpolLC("a", "np-a", `"allow-ingress-from": `+c.refs+`,`))
			require.Equal(t, c.field, decodeMap(t, body)["field"], c.refs)
			require.Contains(t, body, c.says, c.refs)
			pa.Want(404, "GET", a, "")
		}
		e.Admin.Want(201, "POST", lcs, `{"metadata":{"name":"adm"},"spec":{"level":"admin"}}`)
		body := pa.Want(400, "POST", lcs, netpolLC("a", "np-a", `"allow-ingress-from": ["adm"],`))
		require.Equal(t, "spec.allow-ingress-from[0]", decodeMap(t, body)["field"])
		require.Contains(t, body, "at level admin: it has no namespace")
		body = e.Admin.Want(400, "POST", lcs, `{"metadata":{"name":"adm2"},"spec":{"level":"admin","allow-ingress-from":["sib"]}}`)
		require.Equal(t, "spec.allow-ingress-from", decodeMap(t, body)["field"], "an admin logical cloud has no namespace to open")
		e.Admin.Want(404, "GET", lcs+"/adm2", "")
		e.Admin.Want(204, "DELETE", lcs+"/adm", "")
		pa.Want(404, "GET", a, "")
		body = e.Admin.Want(400, "POST", lcs, netpolLC("a", "np-a", `"allow-ingress-from": ["nb/ghost"],`))
		require.Equal(t, "spec.allow-ingress-from[0]", decodeMap(t, body)["field"], "an admin names a logical cloud that exists")
		e.Admin.Want(404, "GET", a, "")
		body = pa.Want(400, "POST", lcs, `{"metadata":{"name":"w"},"spec":{"user":{"user-permissions":[
		  {"permission-name":"np","apiGroups":["networking.k8s.io"],"resources":["networkpolicies"],"verbs":["get","delete"]}]}}}`)
		require.Equal(t, "spec.user.user-permissions[0].resources[0]", decodeMap(t, body)["field"], "no tenant is granted a write on network policies")
		pa.Want(404, "GET", lcs+"/w", "")
	})

	pa.Want(201, "POST", lcs, netpolLC("a", "np-a", ""))
	for _, lc := range []string{a, b} {
		e.Admin.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
		e.Admin.Want(202, "POST", lc+"/apply", "")
	}
	for _, lc := range []string{a, b} {
		e.Admin.Settle(lc, "Instantiated")
	}

	t.Run("the policies on the cluster", func(t *testing.T) {
		ps := policies(t, c1, "np-a")
		require.Len(t, ps, 2, "%v", ps)
		in, out := ps["dcm-ingress"], ps["dcm-egress"]
		require.NotNil(t, in)
		require.NotNil(t, out)
		for _, p := range []*networkingv1.NetworkPolicy{in, out} {
			require.Equal(t, "na", p.Labels[kube.ProjectLabel])
			require.Equal(t, "a", p.Labels[kube.LogicalCloudLabel])
			require.Empty(t, p.Spec.PodSelector.MatchLabels, "every pod")
			require.Empty(t, p.Spec.PodSelector.MatchExpressions, "every pod")
		}
		require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, in.Spec.PolicyTypes)
		require.Equal(t, []string{"np-a"}, ingressFrom(t, in), "only its own namespace gets in")
		require.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, out.Spec.PolicyTypes)
		var dns, dcm bool
		for _, r := range out.Spec.Egress {
			for _, to := range r.To {
				require.Nil(t, to.IPBlock, "DCM_TENANT_EGRESS_CIDRS is empty: nothing outside the cluster")
				switch {
				case to.PodSelector != nil && to.PodSelector.MatchLabels["k8s-app"] == "kube-dns":
					dns = to.NamespaceSelector.MatchLabels[kube.NamespaceNameLabel] == "kube-system" && len(r.Ports) == 2
				case to.NamespaceSelector != nil && len(to.NamespaceSelector.MatchExpressions) == 1:
					dcm = to.NamespaceSelector.MatchExpressions[0].Key == kube.LogicalCloudLabel
				}
			}
		}
		require.True(t, dns, "egress to cluster DNS: %+v", out.Spec.Egress)
		require.True(t, dcm, "egress to the logical clouds' namespaces: %+v", out.Spec.Egress)
		require.Equal(t, []string{"np-b"}, ingressFrom(t, policies(t, c1, "np-b")["dcm-ingress"]), "another project's: its own")
		ns, err := c1.CoreV1().Namespaces().Get(ctx, "np-b", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "b", ns.Labels[kube.LogicalCloudLabel], "the label dcm-egress selects logical clouds' namespaces by")
	})

	t.Run("the tenant reads them and cannot change or delete them", func(t *testing.T) {
		cs, ns := clientFor(t, e.Admin.Kubeconfig(a+"/cluster-references/cluster-1/kubeconfig"))
		require.Equal(t, "np-a", ns)
		list, err := cs.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		require.Len(t, list.Items, 2)
		np, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, "dcm-ingress", metav1.GetOptions{})
		require.NoError(t, err)
		err = cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, "dcm-egress", metav1.DeleteOptions{})
		require.True(t, apierrors.IsForbidden(err), "delete: %v", err)
		np.Spec.Ingress = nil
		_, err = cs.NetworkingV1().NetworkPolicies(ns).Update(ctx, np, metav1.UpdateOptions{})
		require.True(t, apierrors.IsForbidden(err), "update: %v", err)
		_, err = cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-all"},
			Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}}, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "create: %v", err)
		for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
			require.False(t, canI(t, cs, verb, "networkpolicies", ns), verb)
		}
		require.Equal(t, []string{"np-a"}, ingressFrom(t, policies(t, c1, "np-a")["dcm-ingress"]), "unchanged")
		// A permission that would let it write them is refused too.
		body := pa.Want(400, "POST", a+"/user-permissions", `{"permission-name":"np-w","apiGroups":["networking.k8s.io"],"resources":["networkpolicies"],"verbs":["patch"]}`)
		require.Equal(t, "resources[0]", decodeMap(t, body)["field"])
	})

	t.Run("opening ingress reaches the cluster on update", func(t *testing.T) {
		body := pa.Want(200, "PUT", a, `{"metadata":{"name":"a"},"spec":{"allow-ingress-from":["na/sib"]}}`)
		require.Contains(t, body, `"allow-ingress-from":["sib"]`, "a reference into the own project is stored by name")
		body = pa.Want(403, "PUT", a, `{"metadata":{"name":"a"},"spec":{"allow-ingress-from":["sib","nb/b"]}}`)
		require.Equal(t, "spec.allow-ingress-from[1]", decodeMap(t, body)["field"])
		body = pa.Want(400, "PUT", a, `{"metadata":{"name":"a"},"spec":{"allow-ingress-from":["sib","gone"]}}`)
		require.Equal(t, "spec.allow-ingress-from[1]", decodeMap(t, body)["field"])
		require.Contains(t, pa.Want(200, "GET", a, ""), `"allow-ingress-from":["sib"]`, "the refused PUTs stored nothing")

		pa.Want(202, "POST", a+"/update", "")
		pa.Settle(a, "Instantiated")
		// sib has no cluster yet: its namespace is named all the same.
		apitest.Eventually(t, "dcm-ingress admits sib's namespace", func() bool {
			return slices.Equal([]string{"np-a", "np-sib"}, ingressFrom(t, policies(t, c1, "np-a")["dcm-ingress"]))
		})

		// An admin opens a to another project's logical cloud; the project
		// admin may send the GET's body back with it.
		e.Admin.Want(200, "PUT", a, `{"metadata":{"name":"a"},"spec":{"allow-ingress-from":["sib","nb/b"]}}`)
		pa.Want(200, "PUT", a, `{"metadata":{"name":"a"},"spec":{"allow-ingress-from":["sib","nb/b"]}}`)
		pa.Want(202, "POST", a+"/update", "")
		pa.Settle(a, "Instantiated")
		apitest.Eventually(t, "dcm-ingress admits b's namespace", func() bool {
			return slices.Equal([]string{"np-a", "np-sib", "np-b"}, ingressFrom(t, policies(t, c1, "np-a")["dcm-ingress"]))
		})
	})

	t.Run("a named logical cloud cannot be deleted", func(t *testing.T) {
		body := pa.Want(409, "DELETE", sib, "")
		require.Equal(t, "REFERENCED", decodeMap(t, body)["reason"])
		require.Contains(t, body, "spec.allow-ingress-from of a")
		pa.Want(200, "GET", sib, "")
	})

	t.Run("a mesh logical cloud admits its Istio namespace", func(t *testing.T) {
		m := lcs + "/m"
		e.Admin.Want(201, "POST", lcs, `{"metadata":{"name":"m"},"spec":{"namespace":"np-m","service-mesh":{"enabled":true},"allow-ingress-from":["a"]}}`)
		e.Admin.Want(201, "POST", m+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-2"}`)
		e.Admin.Want(202, "POST", m+"/apply", "")
		e.Admin.Settle(m, "Instantiated")
		ps := policies(t, c2, "np-m")
		require.Equal(t, []string{"np-m", "m-istio-system", "np-a"}, ingressFrom(t, ps["dcm-ingress"]))
		require.Contains(t, fmt.Sprint(ps["dcm-egress"].Spec.Egress), "m-istio-system", "egress to its own mesh")
		e.Admin.Want(202, "POST", m+"/terminate", "")
		e.Admin.Settle(m, "Terminated")
		e.Admin.Want(204, "DELETE", m, "")
	})

	t.Run("after terminate no policy is left", func(t *testing.T) {
		for _, lc := range []string{a, b} {
			e.Admin.Want(202, "POST", lc+"/terminate", "")
		}
		for _, lc := range []string{a, b} {
			e.Admin.Settle(lc, "Terminated")
		}
		for _, cs := range []*kubernetes.Clientset{c1, c2} {
			for _, p := range []string{"na", "nb"} {
				left, err := cs.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{LabelSelector: kube.ProjectLabel + "=" + p})
				require.NoError(t, err)
				require.Empty(t, left.Items, p)
			}
		}
		// Terminated, b is still named by a: an admin sees by whom, b's
		// project admin does not.
		body := e.Admin.Want(409, "DELETE", b, "")
		require.Equal(t, "REFERENCED", decodeMap(t, body)["reason"])
		require.Contains(t, body, "na/a", "an admin sees the other project's referrer")
		body = e.ProjectAdmin("nb").Want(409, "DELETE", b, "")
		require.Contains(t, body, "1 of other projects")
		require.NotContains(t, body, "na/a")
		e.Admin.Want(200, "GET", b, "")
		// Once a no longer names them, sib and b may go.
		pa.Want(200, "PUT", a, `{"metadata":{"name":"a"},"spec":{}}`)
		pa.Want(204, "DELETE", sib, "")
		e.Admin.Want(204, "DELETE", b, "")
	})
}
