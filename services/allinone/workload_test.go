package allinone_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
)

// TestTenantWorkloadUnderQuota: a logical cloud's LimitRange gives a pod
// that states no requests or limits its container defaults (the logical
// cloud's own, over the installation's), so the API server admits it
// under a quota on requests and limits; quota-usage shows what the pods
// take; a pod over quota and a privileged pod are refused and the tenant
// is told why; the tenant reads the LimitRange but may not change or
// delete it; a default above the quota is a 400 naming the field, with
// nothing stored; terminate leaves no LimitRange. The pods stay Pending
// (the test clusters have no nodes): admission and the quota controller
// do not need one.
func TestTenantWorkloadUnderQuota(t *testing.T) {
	e := startTenants(t, "wl")
	ctx := context.Background()
	c1 := adminOf(t, e.H.Clusters[0])
	lc := "/v2/projects/wl/logical-clouds/lc"
	e.Admin.Want(201, "POST", "/v2/projects/wl/logical-clouds", `{
	  "metadata": {"name": "lc"},
	  "spec": {"namespace": "wl-ns", "user": {"user-name": "ann", "user-permissions": [
	    {"permission-name": "pods", "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "create", "delete"]},
	    {"permission-name": "read-limits", "apiGroups": [""], "resources": ["limitranges", "resourcequotas"], "verbs": ["get", "list", "watch"]}
	  ]}}}`)
	e.Admin.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
	e.Admin.Want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"compute"},"spec":{"requests.cpu":"1","limits.memory":"1Gi","pods":4}}`)

	// The installation's defaults (cpu 100m/500m, memory 128Mi/256Mi),
	// then the logical cloud's own laid over them.
	var cd struct {
		Default        map[string]string `json:"default"`
		DefaultRequest map[string]string `json:"default-request"`
		Source         string            `json:"source"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.Admin.Want(200, "GET", lc+"/container-defaults", "")), &cd))
	require.Equal(t, "installation", cd.Source)
	require.Equal(t, map[string]string{"cpu": "500m", "memory": "256Mi"}, cd.Default)
	require.Equal(t, map[string]string{"cpu": "100m", "memory": "128Mi"}, cd.DefaultRequest)
	require.NoError(t, json.Unmarshal([]byte(e.Admin.Want(200, "PUT", lc+"/container-defaults",
		`{"default":{"memory":"300Mi"},"default-request":{"cpu":"150m"}}`)), &cd))
	require.Equal(t, "logical-cloud", cd.Source)
	require.Equal(t, map[string]string{"cpu": "500m", "memory": "300Mi"}, cd.Default)
	require.Equal(t, map[string]string{"cpu": "150m", "memory": "128Mi"}, cd.DefaultRequest)
	stored := e.Admin.Want(200, "GET", lc+"/container-defaults", "")

	t.Run("a default above the quota is refused, naming the field", func(t *testing.T) {
		for _, bad := range []struct{ body, field, says string }{
			{`{"default":{"memory":"2Gi"}}`, "default.memory", `above limits.memory 1Gi of quota \"compute\"`},
			{`{"default-request":{"cpu":"2"},"default":{"cpu":"2"}}`, "default-request.cpu", `above requests.cpu 1 of quota \"compute\"`},
			{`{"default-request":{"memory":"512Mi"}}`, "default-request.memory", "above the default memory limit 256Mi"},
			{`{"default":{"cpu":"a lot"}}`, "default.cpu", "not a Kubernetes quantity"},
		} {
			body := e.Admin.Want(400, "PUT", lc+"/container-defaults", bad.body)
			require.Equal(t, bad.field, decodeMap(t, body)["field"], body)
			require.Contains(t, body, bad.says)
			require.Equal(t, stored, e.Admin.Want(200, "GET", lc+"/container-defaults", ""), "nothing stored")
		}
		// A quota that leaves no room for one container with the defaults.
		body := e.Admin.Want(400, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"tiny"},"spec":{"limits.memory":"256Mi"}}`)
		require.Equal(t, "spec.limits.memory", decodeMap(t, body)["field"], body)
		e.Admin.Want(404, "GET", lc+"/cluster-quotas/tiny", "")
	})

	e.Admin.Want(202, "POST", lc+"/apply", "")
	e.Admin.Settle(lc, "Instantiated")
	// Quota admission refuses pods until the cluster has computed the
	// quota's status: wait for it, as a user would.
	usage := func() map[string]string {
		var u apitest.QuotaUsage
		require.NoError(t, json.Unmarshal([]byte(e.Admin.Want(200, "GET", lc+"/quota-usage", "")), &u))
		require.Len(t, u.Clusters, 1)
		require.Empty(t, u.Clusters[0].Error)
		require.Len(t, u.Clusters[0].Quotas, 1)
		require.Equal(t, "compute", u.Clusters[0].Quotas[0].Name)
		return u.Clusters[0].Quotas[0].Used
	}
	apitest.Eventually(t, "the cluster reports the quota", func() bool { return usage()["pods"] == "0" })

	lr, err := c1.CoreV1().LimitRanges("wl-ns").Get(ctx, "container-defaults", metav1.GetOptions{})
	require.NoError(t, err, "the LimitRange is on the cluster")
	require.Len(t, lr.Spec.Limits, 1)
	require.Equal(t, corev1.LimitTypeContainer, lr.Spec.Limits[0].Type)
	require.Equal(t, "300Mi", ptrString(lr.Spec.Limits[0].Default.Memory()))
	require.Equal(t, "150m", ptrString(lr.Spec.Limits[0].DefaultRequest.Cpu()))

	cs, ns := clientFor(t, e.Admin.Kubeconfig(lc+"/cluster-references/cluster-1/kubeconfig"))
	require.Equal(t, "wl-ns", ns)

	t.Run("the tenant reads its LimitRange but may not change it", func(t *testing.T) {
		mine, err := cs.CoreV1().LimitRanges(ns).Get(ctx, "container-defaults", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, lr.Spec, mine.Spec)
		raised := mine.DeepCopy()
		raised.Spec.Limits[0].Default[corev1.ResourceMemory] = resource.MustParse("1Gi")
		_, err = cs.CoreV1().LimitRanges(ns).Update(ctx, raised, metav1.UpdateOptions{})
		require.True(t, apierrors.IsForbidden(err), "update: %v", err)
		err = cs.CoreV1().LimitRanges(ns).Delete(ctx, "container-defaults", metav1.DeleteOptions{})
		require.True(t, apierrors.IsForbidden(err), "delete: %v", err)
		_, err = cs.CoreV1().LimitRanges(ns).Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "mine"}}, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "create: %v", err)
		after, err := c1.CoreV1().LimitRanges(ns).Get(ctx, "container-defaults", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, lr.ResourceVersion, after.ResourceVersion, "untouched")
	})

	t.Run("a pod without requests gets the defaults and is counted", func(t *testing.T) {
		p, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app:1"}}}}, metav1.CreateOptions{})
		require.NoError(t, err, "admitted under the quota with the LimitRange's defaults")
		require.Equal(t, corev1.PodPending, p.Status.Phase, "no node in the test clusters")
		got, err := cs.CoreV1().Pods(ns).Get(ctx, "plain", metav1.GetOptions{})
		require.NoError(t, err)
		res := got.Spec.Containers[0].Resources
		require.Equal(t, "150m", ptrString(res.Requests.Cpu()))
		require.Equal(t, "128Mi", ptrString(res.Requests.Memory()))
		require.Equal(t, "500m", ptrString(res.Limits.Cpu()))
		require.Equal(t, "300Mi", ptrString(res.Limits.Memory()))
		apitest.Eventually(t, "quota-usage shows the pod", func() bool {
			u := usage()
			return u["pods"] == "1" && u["requests.cpu"] == "150m" && u["limits.memory"] == "300Mi"
		})
	})

	t.Run("a pod over quota is refused and the tenant sees the quota", func(t *testing.T) {
		big := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "registry.invalid/app:1",
			// Requests default to the limits: 900m of cpu, over the 850m left.
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("900m")}},
		}}}}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, big, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "%v", err)
		require.Contains(t, err.Error(), "exceeded quota: compute")
		require.Contains(t, err.Error(), "requests.cpu")
		_, err = cs.CoreV1().Pods(ns).Get(ctx, "big", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "%v", err)
	})

	t.Run("a privileged pod is refused and the tenant sees why", func(t *testing.T) {
		priv := true
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "priv"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "registry.invalid/app:1", SecurityContext: &corev1.SecurityContext{Privileged: &priv},
		}}}}
		_, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.True(t, apierrors.IsForbidden(err), "%v", err)
		require.Contains(t, err.Error(), `violates PodSecurity "baseline`)
		require.Contains(t, err.Error(), "securityContext.privileged=true")
	})

	e.Admin.Want(202, "POST", lc+"/terminate", "")
	e.Admin.Settle(lc, "Terminated")
	require.Empty(t, leftOn(t, e.H.Clusters[0], "wl", "lc"), "nothing of the logical cloud is left")
	apitest.Eventually(t, "no LimitRange is left in the namespace", func() bool {
		l, err := c1.CoreV1().LimitRanges("wl-ns").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		return len(l.Items) == 0
	})
}

// ptrString is a quantity's text.
func ptrString(q *resource.Quantity) string { return q.String() }
