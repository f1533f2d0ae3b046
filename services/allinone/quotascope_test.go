package allinone_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
)

// TestScopedQuotaCountsOnlyItsPods: a quota given in seed 002's form
// (Kubernetes' ResourceQuotaSpec with a scopeSelector) on PriorityClass
// sq-high is stored, answered with its selector and applied as a scoped
// ResourceQuota: the cluster counts only the pods of that priority class
// against it (a second such pod is refused, pods of no class are not
// counted and still admitted); a bad selector is a 400 naming the field.
func TestScopedQuotaCountsOnlyItsPods(t *testing.T) {
	e := startTenants(t, "sq")
	ctx := context.Background()
	c1 := adminOf(t, e.H.Clusters[0])
	lc := "/v2/projects/sq/logical-clouds/lc"
	e.Admin.Want(201, "POST", "/v2/projects/sq/logical-clouds", `{
	  "metadata": {"name": "lc"},
	  "spec": {"namespace": "sq-ns", "user": {"user-name": "ann", "user-permissions": [
	    {"permission-name": "pods", "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "create", "delete"]}
	  ]}}}`)
	e.Admin.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
	_, err := c1.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "sq-high"}, Value: 1000}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c1.SchedulingV1().PriorityClasses().Delete(context.Background(), "sq-high", metav1.DeleteOptions{})
	})

	body := e.Admin.Want(400, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"high"},"spec":{"hard":{"pods":"1"},
	  "scopeSelector":{"matchExpressions":[{"operator":"In","scopeName":"PriorityClass"}]}}}`)
	require.Equal(t, "spec.scopeSelector.matchExpressions[0].values", decodeMap(t, body)["field"], body)
	body = e.Admin.Want(400, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"high"},"spec":{"hard":{"pods":"1","cpu":"1"},"scopes":["BestEffort"]}}`)
	require.Equal(t, "spec.scopes[0]", decodeMap(t, body)["field"], body)
	e.Admin.Want(404, "GET", lc+"/cluster-quotas/high", "")

	var q struct {
		Spec          map[string]string `json:"spec"`
		ScopeSelector struct {
			MatchExpressions []struct {
				ScopeName string   `json:"scope-name"`
				Operator  string   `json:"operator"`
				Values    []string `json:"values"`
			} `json:"match-expressions"`
		} `json:"scope-selector"`
		EnforcedBy struct {
			ResourceQuota string `json:"resource-quota"`
			Limits        string `json:"limits"`
		} `json:"enforced-by"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.Admin.Want(201, "POST", lc+"/cluster-quotas", `{"metadata":{"name":"high"},"spec":{"hard":{"pods":"1"},
	  "scopeSelector":{"matchExpressions":[{"operator":"In","scopeName":"PriorityClass","values":["sq-high"]}]}}}`)), &q))
	require.Equal(t, "1", q.Spec["pods"])
	require.Len(t, q.ScopeSelector.MatchExpressions, 1)
	require.Equal(t, []string{"sq-high"}, q.ScopeSelector.MatchExpressions[0].Values)
	require.Equal(t, "high", q.EnforcedBy.ResourceQuota)

	e.Admin.Want(202, "POST", lc+"/apply", "")
	e.Admin.Settle(lc, "Instantiated")
	rq, err := c1.CoreV1().ResourceQuotas("sq-ns").Get(ctx, "high", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, rq.Spec.ScopeSelector)
	require.Equal(t, corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass,
		Operator: corev1.ScopeSelectorOpIn, Values: []string{"sq-high"}}, rq.Spec.ScopeSelector.MatchExpressions[0])
	used := func() map[string]string {
		var u apitest.QuotaUsage
		require.NoError(t, json.Unmarshal([]byte(e.Admin.Want(200, "GET", lc+"/quota-usage", "")), &u))
		require.Len(t, u.Clusters, 1)
		require.Empty(t, u.Clusters[0].Error)
		for _, q := range u.Clusters[0].Quotas {
			if q.Name == "high" {
				return q.Used
			}
		}
		t.Fatalf("quota-usage shows no quota high: %+v", u)
		return nil
	}
	apitest.Eventually(t, "the cluster reports the quota", func() bool { return used()["pods"] == "0" })

	cs, ns := clientFor(t, e.Admin.Kubeconfig(lc+"/cluster-references/cluster-1/kubeconfig"))
	pod := func(name, class string) error {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{PriorityClassName: class, Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/app:1"}}}}, metav1.CreateOptions{})
		return err
	}
	require.NoError(t, pod("plain-1", ""), "a pod of no class is not the quota's")
	require.NoError(t, pod("high-1", "sq-high"))
	apitest.Eventually(t, "the quota counts the sq-high pod alone", func() bool { return used()["pods"] == "1" })
	err = pod("high-2", "sq-high")
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.Contains(t, err.Error(), "exceeded quota: high")
	require.NoError(t, pod("plain-2", ""), "pods of no class are still admitted")
	require.Equal(t, "1", used()["pods"])

	e.Admin.Want(202, "POST", lc+"/terminate", "")
	e.Admin.Settle(lc, "Terminated")
	require.Empty(t, leftOn(t, e.H.Clusters[0], "sq", "lc"), "nothing of the logical cloud is left")
}

// TestUserQuotasBoundTheNamespace: seed 002's per-user quotas become one
// ResourceQuota, users-total, holding their sum, on the cluster (never one
// ResourceQuota per user, which Kubernetes would enforce on every pod of
// the namespace, holding it to the smallest); the API says of each that
// users-total enforces it and that it bounds the namespace.
func TestUserQuotasBoundTheNamespace(t *testing.T) {
	e := startTenants(t, "uq")
	ctx := context.Background()
	c1 := adminOf(t, e.H.Clusters[0])
	const lcs = "/v2/projects/uq/logical-clouds"
	user := func(name, quota string) string {
		return `{"name": "` + name + `", "type": "certificate", "certificate": ` + jsonOf(t, csrPEM(t, "uq", "uq-lc", name)) + `,
		  "permissions": {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "create"]}, "quota": ` + quota + `}`
	}
	e.Admin.Want(201, "POST", lcs, `{"name": "uq-lc", "description": "two users", "resources": {"pods": "30"},
	  "user": [`+user("user-1", `{"cpu": "100", "memory": "500Gi", "pods": "100"}`)+`, `+user("user-2", `{"cpu": "200", "memory": "300Gi", "pods": "200"}`)+`]}`)
	var quotas []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		User       string `json:"user"`
		EnforcedBy struct {
			ResourceQuota string `json:"resource-quota"`
			Limits        string `json:"limits"`
			Note          string `json:"note"`
		} `json:"enforced-by"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.Admin.Want(200, "GET", lcs+"/uq-lc/cluster-quotas", "")), &quotas))
	require.Len(t, quotas, 3)
	for _, q := range quotas {
		require.Equal(t, "namespace", q.EnforcedBy.Limits, q.Metadata.Name)
		switch q.Metadata.Name {
		case "resources":
			require.Empty(t, q.User)
			require.Equal(t, "resources", q.EnforcedBy.ResourceQuota)
		default:
			require.Equal(t, q.Metadata.Name, q.User+"-quota")
			require.Equal(t, "users-total", q.EnforcedBy.ResourceQuota)
			require.Contains(t, q.EnforcedBy.Note, "not this user alone")
		}
	}
	e.Admin.Want(201, "POST", lcs+"/uq-lc/cluster-references", `{"cluster-provider":"edge","cluster-name":"cluster-1"}`)
	e.Admin.Want(202, "POST", lcs+"/uq-lc/apply", "")
	e.Admin.Settle(lcs+"/uq-lc", "Instantiated")
	list, err := c1.CoreV1().ResourceQuotas("uq-lc").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	hard := map[string]map[string]string{}
	for _, rq := range list.Items {
		hard[rq.Name] = map[string]string{}
		for r, q := range rq.Spec.Hard {
			hard[rq.Name][string(r)] = q.String()
		}
	}
	require.Contains(t, hard, "users-total")
	require.Contains(t, hard, "resources")
	require.NotContains(t, hard, "user-1-quota", "no ResourceQuota per user")
	require.NotContains(t, hard, "user-2-quota", "no ResourceQuota per user")
	require.Equal(t, "300", hard["users-total"]["cpu"])
	require.Equal(t, "800Gi", hard["users-total"]["memory"])
	require.Equal(t, "300", hard["users-total"]["pods"])
	require.Equal(t, "30", hard["resources"]["pods"])

	e.Admin.Want(202, "POST", lcs+"/uq-lc/terminate", "")
	e.Admin.Settle(lcs+"/uq-lc", "Terminated")
}

// quotaTail is what the DCM dialect answers of an unscoped quota after
// its spec: no scopes, its user (if any) and the ResourceQuota that
// enforces it, on the namespace (users-total for a user's quota).
func quotaTail(name, user string) string {
	if user == "" {
		return `,"scopes":[],"scope-selector":null,"user":"","enforced-by":{"resource-quota":"` + name + `","limits":"namespace","note":""}`
	}
	return `,"scopes":[],"scope-selector":null,"user":"` + user + `","enforced-by":{"resource-quota":"users-total","limits":"namespace",` +
		`"note":"Kubernetes cannot bound one user inside a namespace: this user's figures are added to the other users' quotas into ResourceQuota users-total, which bounds the whole namespace (all users together), not this user alone"}`
}
