package allinone_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
)

// TestNamespaceAdminPermission: EMCO's standard logical cloud grants
// apiGroups, resources and verbs ["*"] in its namespace (EMCO's
// examples/dcm-advanced/prerequisites.yaml). It is accepted in both
// dialects and rendered as namespace admin: on a real cluster the user
// manages pods, deployments, roles and bindings in its namespace, and
// cannot change its ResourceQuota, LimitRange or NetworkPolicies, grant
// more than it holds, or act outside the namespace.
func TestNamespaceAdminPermission(t *testing.T) {
	e := startTenants(t, "na")
	pa := e.ProjectAdmin("na")
	ctx := context.Background()
	lc := "/v2/projects/na/logical-clouds/everything"
	// The project's dialect: "*" in the logical cloud's body.
	pa.Want(201, "POST", "/v2/projects/na/logical-clouds", `{"metadata":{"name":"everything"},
	  "spec":{"namespace":"na-all","user":{"user-name":"user-1","user-permissions":[
	    {"permission-name":"all","apiGroups":["*"],"resources":["*"],"verbs":["*"]}]}}}`)
	// EMCO's dialect: the permission of EMCO's example, as emcoctl sends it.
	pa.Want(201, "POST", lc+"/user-permissions",
		`{"metadata":{"name":"standard-permission"},"spec":{"namespace":"na-all","apiGroups":["*"],"resources":["*"],"verbs":["*"]}}`)
	pa.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
	pa.Want(202, "POST", lc+"/apply", "")
	pa.Settle(lc, "Instantiated")

	c1 := adminOf(t, e.H.Clusters[0])
	cs, ns := clientFor(t, pa.Kubeconfig(lc+"/cluster-references/cluster-1/kubeconfig"))
	require.Equal(t, "na-all", ns)
	for _, name := range []string{"all", "standard-permission"} {
		role, err := c1.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		for _, r := range role.Rules {
			require.NotContains(t, r.Verbs, "*", "%s: %+v", name, r)
			require.NotContains(t, r.Resources, "*", "%s: %+v", name, r)
		}
	}

	t.Run("manages its namespace", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "registry.invalid/app:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("100m"), "memory": resource.MustParse("64Mi")}},
		}}}}
		apitest.Eventually(t, "the tenant creates a pod (once the quota's status is computed)", func() bool {
			_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			return err == nil
		})
		require.NoError(t, cs.CoreV1().Pods(ns).Delete(ctx, "p1", metav1.DeleteOptions{}))
		labels := map[string]string{"app": "d1"}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d1"}, Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec},
		}}
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, cs.AppsV1().Deployments(ns).Delete(ctx, "d1", metav1.DeleteOptions{}))
		_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "readers"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "readers"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "readers"},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "someone"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, cs.RbacV1().RoleBindings(ns).Delete(ctx, "readers", metav1.DeleteOptions{}))
		require.NoError(t, cs.RbacV1().Roles(ns).Delete(ctx, "readers", metav1.DeleteOptions{}))
	})

	t.Run("cannot change what DCM keeps", func(t *testing.T) {
		err := cs.CoreV1().ResourceQuotas(ns).Delete(ctx, "default", metav1.DeleteOptions{})
		require.True(t, apierrors.IsForbidden(err), "delete its quota: %v", err)
		q, err := cs.CoreV1().ResourceQuotas(ns).Get(ctx, "default", metav1.GetOptions{})
		require.NoError(t, err, "it reads its quota")
		q.Spec.Hard[corev1.ResourcePods] = resource.MustParse("100000")
		_, err = cs.CoreV1().ResourceQuotas(ns).Update(ctx, q, metav1.UpdateOptions{})
		require.True(t, apierrors.IsForbidden(err), "raise its quota: %v", err)
		_, err = cs.CoreV1().ResourceQuotas(ns).Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "create a quota: %v", err)

		lr, err := c1.CoreV1().LimitRanges(ns).Get(ctx, "container-defaults", metav1.GetOptions{})
		require.NoError(t, err, "DCM's LimitRange is on the cluster")
		lr.Spec.Limits = nil
		_, err = cs.CoreV1().LimitRanges(ns).Update(ctx, lr, metav1.UpdateOptions{})
		require.True(t, apierrors.IsForbidden(err), "edit its LimitRange: %v", err)
		err = cs.CoreV1().LimitRanges(ns).Delete(ctx, "container-defaults", metav1.DeleteOptions{})
		require.True(t, apierrors.IsForbidden(err), "delete its LimitRange: %v", err)

		for _, np := range []string{"dcm-ingress", "dcm-egress"} {
			p, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, np, metav1.GetOptions{})
			require.NoError(t, err, "it reads %s", np)
			p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
			_, err = cs.NetworkingV1().NetworkPolicies(ns).Update(ctx, p, metav1.UpdateOptions{})
			require.True(t, apierrors.IsForbidden(err), "edit %s: %v", np, err)
			err = cs.NetworkingV1().NetworkPolicies(ns).Delete(ctx, np, metav1.DeleteOptions{})
			require.True(t, apierrors.IsForbidden(err), "delete %s: %v", np, err)
		}
		_, err = cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-all"},
			Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}}, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "create a network policy: %v", err)
		require.False(t, canI(t, cs, "patch", "namespaces", ns))
		require.False(t, canI(t, cs, "impersonate", "serviceaccounts", ns))
	})

	t.Run("grants nothing it does not hold", func(t *testing.T) {
		_, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "netpol"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"create"}}}}, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "a Role with a write it lacks: %v", err)
		_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "root"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "dcm:na:everything:user-1"}}}, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "bind cluster-admin in its namespace: %v", err)
		_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "wild"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}}, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "a Role with *: %v", err)
	})

	t.Run("nothing outside its namespace", func(t *testing.T) {
		for _, where := range []string{"", "default", "kube-system"} {
			for _, verb := range []string{"list", "create", "delete"} {
				require.False(t, canI(t, cs, verb, "pods", where), "%s pods in %q", verb, where)
				require.False(t, canI(t, cs, verb, "roles", where), "%s roles in %q", verb, where)
			}
		}
		require.False(t, canI(t, cs, "create", "namespaces", ""))
		require.False(t, canI(t, cs, "create", "clusterrolebindings", ""))
		_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		require.True(t, apierrors.IsForbidden(err), "%v", err)
	})

	t.Run("the rules are Kubernetes' admin less DCM's", func(t *testing.T) {
		// admin aggregates these roles; the test clusters' apiserver
		// bootstraps them (its admin's own rules wait for the controller).
		held := map[string]bool{}
		for _, name := range []string{"system:aggregate-to-admin", "system:aggregate-to-edit", "system:aggregate-to-view"} {
			r, err := c1.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
			require.NoError(t, err)
			for _, rule := range r.Rules {
				for k := range triples(rule.APIGroups, rule.Resources, rule.Verbs) {
					held[k] = true
				}
			}
		}
		dcm := map[string]bool{}
		role, err := c1.RbacV1().Roles(ns).Get(ctx, "all", metav1.GetOptions{})
		require.NoError(t, err)
		for _, rule := range role.Rules {
			for k := range triples(rule.APIGroups, rule.Resources, rule.Verbs) {
				require.True(t, held[k], "DCM grants %s, which admin does not", k)
				dcm[k] = true
			}
		}
		var left []string
		for k := range held {
			if !dcm[k] {
				left = append(left, k)
			}
		}
		slices.Sort(left)
		want := []string{"/serviceaccounts/impersonate", "/serviceaccounts/token/create"}
		for _, g := range []string{"extensions", "networking.k8s.io"} {
			for _, v := range []string{"create", "delete", "deletecollection", "patch", "update"} {
				want = append(want, g+"/networkpolicies/"+v)
			}
		}
		slices.Sort(want)
		require.Equal(t, want, left, "admin less networkpolicy writes, serviceaccount impersonation and tokens")
		require.Len(t, kube.NamespaceAdminRules(), len(role.Rules))
	})
}

// triples are group/resource/verb of every combination of a rule.
func triples(groups, resources, verbs []string) map[string]bool {
	out := map[string]bool{}
	for _, g := range groups {
		for _, r := range resources {
			for _, v := range verbs {
				out[fmt.Sprintf("%s/%s/%s", g, r, v)] = true
			}
		}
	}
	return out
}
