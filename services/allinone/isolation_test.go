package allinone_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

func startTenants(t *testing.T, projects ...string) *apitest.Tenants {
	return apitest.StartTenantsOn(t, kubetest.ForTests(t, 3), projects...)
}

// admin client of a test cluster.
func adminOf(t testing.TB, c *kubetest.Cluster) *kubernetes.Clientset {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// canI asks the cluster, as the kubeconfig's user, whether it may verb
// resource in namespace.
func canI(t testing.TB, cs *kubernetes.Clientset, verb, resource, ns string) bool {
	r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(context.Background(), &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: verb, Resource: resource}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}

// snapshot is every object of a namespace, and the namespace, as the
// cluster holds them (resourceVersion included): equal snapshots mean
// nothing was touched.
func snapshot(t testing.TB, cs *kubernetes.Clientset, ns string) string {
	ctx := context.Background()
	var b strings.Builder
	n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	fmt.Fprintf(&b, "namespace %s %s %v %v\n", n.Name, n.ResourceVersion, n.Labels, n.Annotations)
	cms, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range cms.Items {
		fmt.Fprintf(&b, "configmap %s %s %v\n", o.Name, o.ResourceVersion, o.Data)
	}
	rqs, err := cs.CoreV1().ResourceQuotas(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range rqs.Items {
		fmt.Fprintf(&b, "quota %s %s %v\n", o.Name, o.ResourceVersion, o.Spec.Hard)
	}
	roles, err := cs.RbacV1().Roles(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range roles.Items {
		fmt.Fprintf(&b, "role %s %s %v\n", o.Name, o.ResourceVersion, o.Rules)
	}
	rbs, err := cs.RbacV1().RoleBindings(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, o := range rbs.Items {
		fmt.Fprintf(&b, "binding %s %s %v\n", o.Name, o.ResourceVersion, o.Subjects)
	}
	return b.String()
}

// certOf is the client certificate of a kubeconfig.
func certOf(t testing.TB, kc []byte) *x509.Certificate {
	cfg, err := clientcmd.Load(kc)
	require.NoError(t, err)
	for _, a := range cfg.AuthInfos {
		block, _ := pem.Decode(a.ClientCertificateData)
		require.NotNil(t, block)
		c, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		return c
	}
	t.Fatal("no user in the kubeconfig")
	return nil
}

// TestTenantIsolationOnSharedCluster: two projects with the same logical
// cloud and user names on one cluster each reach their own namespace only;
// a third tenant cannot take a namespace that is held, by DCM or by hand,
// nor touch it by its own apply, update and terminate; names that would
// collide as text (team/x-prod, team-x/prod) do not.
func TestTenantIsolationOnSharedCluster(t *testing.T) {
	e := startTenants(t, "ta", "tb", "tc", "team", "team-x")
	ctx := context.Background()
	c1 := adminOf(t, e.H.Clusters[0])
	a := e.TenantLC("ta", "lc", "iso-a", "bob", "cluster-1")
	b := e.TenantLC("tb", "lc", "iso-b", "bob", "cluster-1")
	for _, lc := range []string{a, b} {
		e.Admin.Want(202, "POST", lc+"/apply", "")
	}
	for _, lc := range []string{a, b} {
		e.Admin.Settle(lc, "Instantiated")
	}
	kA := e.Admin.Kubeconfig(a + "/cluster-references/cluster-1/kubeconfig")
	kB := e.Admin.Kubeconfig(b + "/cluster-references/cluster-1/kubeconfig")
	csA, nsA := clientFor(t, kA)
	csB, nsB := clientFor(t, kB)
	require.Equal(t, []string{"iso-a", "iso-b"}, []string{nsA, nsB})

	t.Run("one identity per project, logical cloud and user", func(t *testing.T) {
		certA, certB := certOf(t, kA), certOf(t, kB)
		require.Equal(t, "dcm:ta:lc:bob", certA.Subject.CommonName)
		require.Equal(t, []string{"dcm:ta:lc"}, certA.Subject.Organization)
		require.Equal(t, "dcm:tb:lc:bob", certB.Subject.CommonName)
		// The configured lifetime (7 days by default); the signer backdates
		// notBefore, so notAfter is measured from now.
		left := time.Until(certA.NotAfter)
		require.InDelta(t, (7 * 24 * time.Hour).Seconds(), left.Seconds(), (10 * time.Minute).Seconds(), "notAfter %s", certA.NotAfter)

		_, err := csA.CoreV1().ConfigMaps(nsA).Create(ctx, configMap("mine"), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = csB.CoreV1().ConfigMaps(nsB).Create(ctx, configMap("theirs"), metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = csB.CoreV1().ConfigMaps(nsA).Get(ctx, "mine", metav1.GetOptions{})
		require.True(t, apierrors.IsForbidden(err), "tb reads ta's ConfigMap: %v", err)
		_, err = csA.CoreV1().ConfigMaps(nsB).Get(ctx, "theirs", metav1.GetOptions{})
		require.True(t, apierrors.IsForbidden(err), "ta reads tb's ConfigMap: %v", err)
		for _, verb := range []string{"get", "list", "create", "delete"} {
			require.True(t, canI(t, csA, verb, "configmaps", nsA), verb)
			require.False(t, canI(t, csA, verb, "configmaps", nsB), verb)
			require.True(t, canI(t, csB, verb, "configmaps", nsB), verb)
			require.False(t, canI(t, csB, verb, "configmaps", nsA), verb)
		}
	})

	t.Run("quota always set and not the tenant's to change", func(t *testing.T) {
		q, err := csA.CoreV1().ResourceQuotas(nsA).Get(ctx, "default", metav1.GetOptions{})
		require.NoError(t, err, "the tenant may read its quota")
		require.NotEmpty(t, q.Spec.Hard)
		err = csA.CoreV1().ResourceQuotas(nsA).Delete(ctx, "default", metav1.DeleteOptions{})
		require.True(t, apierrors.IsForbidden(err), "%v", err)
		require.False(t, canI(t, csA, "delete", "namespaces", ""))
		require.False(t, canI(t, csA, "delete", "namespaces", nsA))
		// An empty quota body still bounds the namespace with the default's limits.
		e.Admin.Want(201, "POST", a+"/cluster-quotas", `{"metadata":{"name":"empty"},"spec":{}}`)
		e.Admin.Want(202, "POST", a+"/update", "")
		e.Admin.Settle(a, "Instantiated")
		apitest.Eventually(t, "the empty quota is on the cluster", func() bool {
			q, err := c1.CoreV1().ResourceQuotas(nsA).Get(ctx, "empty", metav1.GetOptions{})
			return err == nil && q.Spec.Hard.Cpu().String() == "8" && q.Spec.Hard.Memory().String() == "32Gi" && q.Spec.Hard.Pods().String() == "100"
		})
	})

	t.Run("pod security baseline", func(t *testing.T) {
		pod := func(name string, mutate func(*corev1.Pod)) *corev1.Pod {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: "registry.invalid/app:1",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("100m"), "memory": resource.MustParse("64Mi")}},
			}}}}
			mutate(p)
			return p
		}
		priv := true
		for name, m := range map[string]func(*corev1.Pod){
			"hostpath": func(p *corev1.Pod) {
				p.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc"}}}}
			},
			"privileged": func(p *corev1.Pod) {
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &priv}
			},
			"hostnetwork": func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		} {
			_, err := csA.CoreV1().Pods(nsA).Create(ctx, pod(name, m), metav1.CreateOptions{})
			require.True(t, apierrors.IsForbidden(err), "%s: %v", name, err)
			require.Contains(t, err.Error(), "violates PodSecurity \"baseline", name)
		}
		created, err := csA.CoreV1().Pods(nsA).Create(ctx, pod("plain", func(*corev1.Pod) {}), metav1.CreateOptions{})
		require.NoError(t, err, "a plain pod is admitted (and stays Pending: the test clusters have no nodes)")
		require.Equal(t, corev1.PodPending, created.Status.Phase)
	})

	t.Run("a token user gets a bound token that expires", func(t *testing.T) {
		tok := "/v2/projects/tc/logical-clouds/tok"
		e.Admin.Want(201, "POST", "/v2/projects/tc/logical-clouds", `{"metadata":{"name":"tok"},"spec":{"namespace":"iso-tok",
		  "user":{"user-name":"robot","type":"token","user-permissions":[{"permission-name":"cm","apiGroups":[""],"resources":["configmaps"],"verbs":["list"]}]}}}`)
		e.Admin.Want(201, "POST", tok+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-3"}`)
		e.Admin.Want(202, "POST", tok+"/apply", "")
		e.Admin.Settle(tok, "Instantiated")
		kc := e.Admin.Kubeconfig(tok + "/cluster-references/cluster-3/kubeconfig")
		cfg, err := clientcmd.Load(kc)
		require.NoError(t, err)
		var token string
		for _, a := range cfg.AuthInfos {
			token = a.Token
		}
		require.NotEmpty(t, token)
		require.InDelta(t, (24 * time.Hour).Seconds(), time.Until(jwtExpiry(t, token)).Seconds(), 120, "the default lifetime")
		cs, ns := clientFor(t, kc)
		_, err = cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		secrets, err := adminOf(t, e.H.Clusters[2]).CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		for _, sec := range secrets.Items {
			require.NotEqual(t, corev1.SecretTypeServiceAccountToken, sec.Type, "no legacy token Secret: %s", sec.Name)
		}
		e.Admin.Want(202, "POST", tok+"/terminate", "")
		e.Admin.Settle(tok, "Terminated")
	})

	before := snapshot(t, c1, nsA)

	t.Run("a third tenant cannot take a held namespace", func(t *testing.T) {
		c := e.TenantLC("tc", "lc", "iso-a", "bob", "cluster-2")
		// Free on cluster-2: applied there.
		e.Admin.Want(202, "POST", c+"/apply", "")
		e.Admin.Settle(c, "Instantiated")
		// cluster-1 holds iso-a for ta: the update is refused, without
		// naming the other tenant's project (an admin finds it in the log).
		e.Admin.Want(201, "POST", c+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
		msg := e.Admin.Want(409, "POST", c+"/update", "")
		require.Contains(t, msg, `namespace \"iso-a\" on cluster edge/cluster-1 belongs to another project`)
		require.NotContains(t, msg, `\"ta\"`)
		require.Equal(t, "OWNED_BY_OTHER", decodeMap(t, msg)["reason"])
		require.Equal(t, before, snapshot(t, c1, nsA))
		e.Admin.Want(202, "POST", c+"/terminate", "")
		e.Admin.Settle(c, "Terminated")
		require.Equal(t, before, snapshot(t, c1, nsA), "ta's namespace is untouched by tc's terminate")
		// Applying again, with cluster-1 referenced from the start: 409 as well.
		msg = e.Admin.Want(409, "POST", c+"/apply", "")
		require.Contains(t, msg, `belongs to another project`)
		require.NotContains(t, msg, `\"ta\"`)
		require.Equal(t, before, snapshot(t, c1, nsA))
		_, err := csA.CoreV1().ConfigMaps(nsA).Get(ctx, "mine", metav1.GetOptions{})
		require.NoError(t, err, "ta's kubeconfig still works")
	})

	t.Run("a namespace made by hand is never taken", func(t *testing.T) {
		_, err := c1.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "iso-handmade"}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		_, err = c1.CoreV1().ConfigMaps("iso-handmade").Create(ctx, configMap("ops-data"), metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		hand := snapshot(t, c1, "iso-handmade")
		c := e.TenantLC("tc", "hand", "iso-handmade", "carol", "cluster-1")
		msg := e.Admin.Want(409, "POST", c+"/apply", "")
		require.Contains(t, msg, `already exists on cluster edge/cluster-1 and was not made by DCM`)
		require.Equal(t, "NOT_MANAGED", decodeMap(t, msg)["reason"])
		require.Equal(t, hand, snapshot(t, c1, "iso-handmade"))
		e.Admin.Want(204, "DELETE", c, "")
		require.Equal(t, hand, snapshot(t, c1, "iso-handmade"))
	})

	t.Run("the cluster's own namespaces are refused at create", func(t *testing.T) {
		for ns, field := range map[string]string{"kube-system": "spec.namespace", "default": "spec.namespace", "kube-public": "spec.namespace", "cert-manager-system": "spec.namespace"} {
			body := e.Admin.Want(400, "POST", "/v2/projects/tc/logical-clouds", `{"metadata":{"name":"grab"},"spec":{"namespace":"`+ns+`"}}`)
			require.Equal(t, field, decodeMap(t, body)["field"], ns)
		}
		e.Admin.Want(400, "POST", "/v2/projects/tc/logical-clouds", `{"metadata":{"name":"default"}}`)
		e.Admin.Want(400, "POST", "/v2/projects/tc/logical-clouds", `{"name":"kube-node-lease"}`)
		e.Admin.Want(404, "GET", "/v2/projects/tc/logical-clouds/grab", "")
	})

	t.Run("names that collide as text do not collide", func(t *testing.T) {
		x := e.TenantLC("team", "x-prod", "iso-x", "u", "cluster-1")
		y := e.TenantLC("team-x", "prod", "iso-y", "u", "cluster-1")
		for _, lc := range []string{x, y} {
			e.Admin.Want(202, "POST", lc+"/apply", "")
			e.Admin.Settle(lc, "Instantiated")
		}
		kX := e.Admin.Kubeconfig(x + "/cluster-references/cluster-1/kubeconfig")
		kY := e.Admin.Kubeconfig(y + "/cluster-references/cluster-1/kubeconfig")
		require.NotEqual(t, certOf(t, kX).Subject.CommonName, certOf(t, kY).Subject.CommonName)
		csX, _ := clientFor(t, kX)
		csY, _ := clientFor(t, kY)
		use := func(cs *kubernetes.Clientset, ns string) error {
			_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			return err
		}
		require.NoError(t, use(csX, "iso-x"))
		require.NoError(t, use(csY, "iso-y"))
		// x-prod terminates: team-x/prod's CSR, bindings and kubeconfig stay.
		e.Admin.Want(202, "POST", x+"/terminate", "")
		e.Admin.Settle(x, "Terminated")
		require.NoError(t, use(csY, "iso-y"))
		e.Admin.Kubeconfig(y + "/cluster-references/cluster-1/kubeconfig")
		require.NotEmpty(t, leftOn(t, e.H.Clusters[0], "team-x", "prod"))
		// And the other way round, after x-prod is applied again.
		e.Admin.Want(202, "POST", x+"/apply", "")
		e.Admin.Settle(x, "Instantiated")
		e.Admin.Want(202, "POST", y+"/terminate", "")
		e.Admin.Settle(y, "Terminated")
		kX = e.Admin.Kubeconfig(x + "/cluster-references/cluster-1/kubeconfig")
		csX, _ = clientFor(t, kX)
		require.NoError(t, use(csX, "iso-x"))
		e.Admin.Want(202, "POST", x+"/terminate", "")
		e.Admin.Settle(x, "Terminated")
	})

	t.Run("tb's terminate leaves ta alone", func(t *testing.T) {
		e.Admin.Want(202, "POST", b+"/terminate", "")
		e.Admin.Settle(b, "Terminated")
		require.Empty(t, leftOn(t, e.H.Clusters[0], "tb", "lc"))
		require.Equal(t, before, snapshot(t, c1, nsA))
		e.Admin.Want(204, "DELETE", b+"/cluster-providers/edge/cluster-references/cluster-1", "")
	})
	t.Run("deleting a cluster from the registry touches no tenant object", func(t *testing.T) {
		// ta is on cluster-1; its reference is dropped (no update), so the
		// registry lets the cluster go: whatever it answers, ta's objects stay.
		e.Admin.Want(204, "DELETE", a+"/cluster-providers/edge/cluster-references/cluster-1", "")
		code, body := apitest.Call(t, e.Admin.C, "DELETE", e.Admin.Base+"/v2/cluster-providers/edge/clusters/cluster-1", "")
		require.Contains(t, []int{204, 409}, code, "%s", body)
		require.Equal(t, before, snapshot(t, c1, nsA))
		_, err := csA.CoreV1().ConfigMaps(nsA).Get(ctx, "mine", metav1.GetOptions{})
		require.NoError(t, err)
	})

	// Leave the shared clusters as found: ta's objects go with the cluster's admin access.
	require.NoError(t, c1.CoreV1().Namespaces().Delete(ctx, nsA, metav1.DeleteOptions{}))
	require.NoError(t, c1.CoreV1().Namespaces().Delete(ctx, "iso-handmade", metav1.DeleteOptions{}))
}

// TestGrantsOnlyAnAdminMakes: a project-admin keeps what it had, but levels
// admin and privileged, permissions outside the logical cloud's namespace,
// privileged pod security and quotas over the maximum are the admin's to
// grant; escalation is refused at standard level for everyone. Checked
// over REST through the real gateway.
func TestGrantsOnlyAnAdminMakes(t *testing.T) {
	t.Parallel()
	s := stacktest.StartWith(t, stacktest.Options{Args: []string{"-max-quota", "cpu=16,pods=100"}})
	admin := apitest.NewREST(t, s)
	admin.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"pa"}}`)
	e := &apitest.Tenants{T: t, S: s, Admin: admin}
	pa := e.ProjectAdmin("pa")
	lcs := "/v2/projects/pa/logical-clouds"
	for _, c := range []struct{ body, field, says string }{
		{`{"metadata":{"name":"p1"},"spec":{"level":"privileged"}}`, "spec.level", `only an admin may create a logical cloud at level \"privileged\"`},
		{`{"metadata":{"name":"p1"},"spec":{"level":"admin"}}`, "spec.level", "only an admin"},
		{`{"metadata":{"name":"p1"},"spec":{"level":"0"}}`, "spec.level", "only an admin"},
		{`{"name":"p1","resources":{"cpu":"32"}}`, "resources.cpu", "exceeds this installation's maximum 16"},
	} {
		body := pa.Want(403, "POST", lcs, c.body)
		require.Equal(t, c.field, decodeMap(t, body)["field"], c.body)
		require.Contains(t, body, c.says)
	}
	pa.Want(404, "GET", lcs+"/p1", "")
	// The admin may do all of it.
	admin.Want(201, "POST", lcs, `{"metadata":{"name":"priv"},"spec":{"level":"privileged","pod-security":"privileged"}}`)
	admin.Want(201, "POST", lcs, `{"metadata":{"name":"ops"},"spec":{"level":"admin"}}`)
	admin.Want(201, "POST", lcs, `{"name":"big","resources":{"cpu":"32"}}`)
	// In the admin's privileged logical cloud, a project-admin may grant in
	// its namespace only.
	priv := lcs + "/priv"
	for _, c := range []struct{ body, field string }{
		{`{"permission-name":"all","apiGroups":["*"],"resources":["*"],"verbs":["*"]}`, "namespace"},
		{`{"permission-name":"ks","namespace":"kube-system","apiGroups":[""],"resources":["secrets"],"verbs":["get"]}`, "namespace"},
	} {
		body := pa.Want(403, "POST", priv+"/user-permissions", c.body)
		require.Equal(t, c.field, decodeMap(t, body)["field"])
		require.Contains(t, body, "only an admin may grant")
	}
	pa.Want(201, "POST", priv+"/user-permissions", `{"permission-name":"own","namespace":"priv","apiGroups":[""],"resources":["pods"],"verbs":["list"]}`)
	admin.Want(201, "POST", priv+"/user-permissions", `{"permission-name":"all","apiGroups":["*"],"resources":["*"],"verbs":["*"]}`)
	// Pod security: privileged is an admin's choice, and never at standard.
	pa.Want(200, "PUT", priv, `{"metadata":{"name":"priv"},"spec":{"pod-security":"baseline"}}`)
	pa.Want(403, "PUT", priv, `{"metadata":{"name":"priv"},"spec":{"pod-security":"privileged"}}`)
	admin.Want(200, "PUT", priv, `{"metadata":{"name":"priv"},"spec":{"pod-security":"privileged"}}`)
	body := pa.Want(400, "POST", lcs, `{"metadata":{"name":"std"},"spec":{"pod-security":"privileged"}}`)
	require.Contains(t, body, "needs level privileged")
	pa.Want(201, "POST", lcs, `{"metadata":{"name":"std"},"spec":{"pod-security":"restricted"}}`)
	require.Contains(t, pa.Want(200, "GET", lcs+"/std", ""), `"pod-security":"restricted"`)
	// Quotas over the maximum, through the quota service.
	pa.Want(403, "POST", lcs+"/std/cluster-quotas", `{"metadata":{"name":"q"},"spec":{"cpu":"17"}}`)
	pa.Want(201, "POST", lcs+"/std/cluster-quotas", `{"metadata":{"name":"q"},"spec":{"cpu":"16"}}`)
	admin.Want(200, "PUT", lcs+"/std/cluster-quotas/q", `{"metadata":{"name":"q"},"spec":{"cpu":"64"}}`)
	// Escalation at standard level, for anyone: 400 naming the rule.
	for _, c := range []struct{ body, field, says string }{
		{`{"permission-name":"e1","apiGroups":["rbac.authorization.k8s.io"],"resources":["roles"],"verbs":["escalate"]}`, "verbs[0]", "escalate"},
		{`{"permission-name":"e2","apiGroups":["rbac.authorization.k8s.io"],"resources":["rolebindings"],"verbs":["*"]}`, "verbs", "escalate and bind"},
		{`{"permission-name":"e3","apiGroups":[""],"resources":["users"],"verbs":["impersonate"]}`, "verbs[0]", "impersonate"},
		{`{"permission-name":"e4","apiGroups":[""],"resources":["nodes"],"verbs":["get"]}`, "resources[0]", "nodes"},
		{`{"permission-name":"e5","apiGroups":["certificates.k8s.io"],"resources":["certificatesigningrequests/approval"],"verbs":["update"]}`, "resources[0]", "approval"},
		{`{"permission-name":"e6","apiGroups":[""],"resources":["resourcequotas"],"verbs":["delete"]}`, "resources[0]", "resourcequotas"},
		{`{"permission-name":"e7","apiGroups":[""],"resources":["namespaces"],"verbs":["delete"]}`, "resources[0]", "namespaces"},
		{`{"permission-name":"e8","apiGroups":[""],"resources":["limitranges"],"verbs":["create"]}`, "resources[0]", "limitranges"},
		{`{"permission-name":"e9","apiGroups":[""],"resources":["*"],"verbs":["delete"]}`, "resources[0]", "list the resources"},
	} {
		for _, who := range []*apitest.REST{pa, admin} {
			body := who.Want(400, "POST", lcs+"/std/user-permissions", c.body)
			require.Equal(t, c.field, decodeMap(t, body)["field"], c.body)
			require.Contains(t, body, c.says)
		}
	}
	require.Equal(t, "[]", strings.TrimSpace(pa.Want(200, "GET", lcs+"/std/user-permissions", "")), "nothing refused was stored")
}

// TestCSRSubjectRules: a CSR a user brings must name exactly the identity
// DCM gives that user; anything else is 400 and nothing is stored.
func TestCSRSubjectRules(t *testing.T) {
	t.Parallel()
	s := stacktest.Start(t)
	r := apitest.NewREST(t, s)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"cs"}}`)
	csr := func(cn string, orgs ...string) string {
		p, _, err := kube.NewCSR(cn, orgs...)
		require.NoError(t, err)
		return string(p)
	}
	for name, pemText := range map[string]string{
		"system:masters": csr("dcm:cs:lc:bob", "system:masters"),
		"an extra O":     csr("dcm:cs:lc:bob", "dcm:cs:lc", "ops"),
		"wrong CN":       csr("dcm:cs:lc:alice", "dcm:cs:lc"),
		"plain CN":       csr("bob", "dcm:cs:lc"),
		"other project":  csr("dcm:other:lc:bob", "dcm:other:lc"),
	} {
		body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": "lc"},
			"spec": map[string]any{"user": map[string]string{"user-name": "bob", "certificate": pemText}}})
		require.NoError(t, err)
		got := r.Want(400, "POST", "/v2/projects/cs/logical-clouds", string(body))
		require.Equal(t, "spec.user.certificate", decodeMap(t, got)["field"], name)
		require.Contains(t, got, "CN=dcm:cs:lc:bob", name)
	}
	r.Want(404, "GET", "/v2/projects/cs/logical-clouds/lc", "")
	body, err := json.Marshal(map[string]any{"metadata": map[string]string{"name": "lc"},
		"spec": map[string]any{"user": map[string]string{"user-name": "bob", "certificate": csr("dcm:cs:lc:bob", "dcm:cs:lc")}}})
	require.NoError(t, err)
	r.Want(201, "POST", "/v2/projects/cs/logical-clouds", string(body))
}

func decodeMap(t testing.TB, body string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m), "%s", body)
	return m
}

// jwtExpiry reads the exp claim of a JWT (not verified: the cluster does
// that when the token is used).
func jwtExpiry(t testing.TB, token string) time.Time {
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3)
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims struct {
		Exp int64 `json:"exp"`
	}
	require.NoError(t, json.Unmarshal(raw, &claims))
	return time.Unix(claims.Exp, 0)
}

// TestKubeconfigRenewsCertificate: once more than DCM_CERT_RENEW_PERCENT of
// a user certificate's life has passed, reading the kubeconfig has the
// cluster issue a fresh certificate for the same identity, which works;
// the renewal requests do not stay on the cluster. The test sets the
// shortest lifetime a signer honours (10m) and 10%: the signer backdates
// notBefore by 5 minutes, so every certificate is due at once.
func TestKubeconfigRenewsCertificate(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	s := stacktest.StartWith(t, stacktest.Options{Args: []string{"-cert-lifetime", "10m", "-cert-renew-percent", "10"}})
	r := apitest.NewREST(t, s)
	apitest.RegisterHarness(t, r, h)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"renew"}}`)
	e := &apitest.Tenants{T: t, S: s, Admin: r, H: h}
	lc := e.TenantLC("renew", "lc", "renew-ns", "eve", "cluster-2")
	r.Want(202, "POST", lc+"/apply", "")
	r.Settle(lc, "Instantiated")
	ctx := context.Background()
	c2 := adminOf(t, h.Clusters[1])
	csr, err := c2.CertificatesV1().CertificateSigningRequests().Get(ctx, "dcm.renew.lc.eve", metav1.GetOptions{})
	require.NoError(t, err)
	first := certOf(t, []byte(mustCert(t, csr.Status.Certificate)))

	var serials []string
	for range 3 {
		kc := r.Kubeconfig(lc + "/cluster-references/cluster-2/kubeconfig")
		c := certOf(t, kc)
		require.Equal(t, "dcm:renew:lc:eve", c.Subject.CommonName)
		require.Equal(t, []string{"dcm:renew:lc"}, c.Subject.Organization)
		require.True(t, c.NotAfter.After(first.NotAfter) || c.NotAfter.Equal(first.NotAfter))
		serials = append(serials, c.SerialNumber.String())
		cs, ns := clientFor(t, kc)
		_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err, "the renewed certificate authenticates as the same user")
	}
	require.NotContains(t, serials, first.SerialNumber.String(), "each read renewed the certificate")
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(serials))), 3)
	list, err := c2.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, c := range list.Items {
		require.Empty(t, c.Annotations["dcm.io/renews"], "renewal request %s was deleted", c.Name)
	}
	r.Want(202, "POST", lc+"/terminate", "")
	r.Settle(lc, "Terminated")
}

// mustCert wraps a PEM certificate in a one-user kubeconfig for certOf.
func mustCert(t testing.TB, certPEM []byte) string {
	require.NotEmpty(t, certPEM)
	return "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    client-certificate-data: " + base64.StdEncoding.EncodeToString(certPEM) + "\n"
}
