package allinone_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// stagedStatus is the part of GET .../status a staged rollout test reads.
type stagedStatus struct {
	State   string `json:"state"`
	Rollout *struct {
		Wave              int      `json:"wave"`
		Admitted          int      `json:"admitted"`
		Total             int      `json:"total"`
		Paused            bool     `json:"paused"`
		Failed            []string `json:"failed"`
		RollbackAvailable bool     `json:"rollback-available"`
	} `json:"rollout"`
}

// deny makes cluster c's API server refuse (422 Invalid) the creates and
// updates of resource (group, version) for which expr is false, with a
// ValidatingAdmissionPolicy (no webhook server needed), until the test
// ends; it returns once enforced says the policy is.
func deny(t *testing.T, c *kubetest.Cluster, name, group, version, resource, expr string, enforced func(*restclient.Config) bool) {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	fail := admissionv1.Fail
	invalid := metav1.StatusReasonInvalid
	_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: expr, Message: "not allowed on this site", Reason: &invalid}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	apitest.Eventually(t, "the policy "+name+" is enforced", func() bool { return enforced(cfg) })
}

// denyTier makes cluster c refuse namespace ns labelled tier=v2.
func denyTier(t *testing.T, c *kubetest.Cluster, ns string) {
	t.Helper()
	deny(t, c, "deny-tier-"+ns, "", "v1", "namespaces",
		"object.metadata.name != '"+ns+"' || !has(object.metadata.labels) || !('tier' in object.metadata.labels) || object.metadata.labels['tier'] != 'v2'",
		func(cfg *restclient.Config) bool {
			cs, err := kubernetes.NewForConfig(cfg)
			require.NoError(t, err)
			_, err = cs.CoreV1().Namespaces().Patch(context.Background(), ns, types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"v2"}}}`),
				metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
			return apierrors.IsInvalid(err)
		})
}

// tierOf is the tier label of namespace ns on cluster c ("" if none).
func tierOf(t *testing.T, c *kubetest.Cluster, ns string) string {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	got, err := cs.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	require.NoError(t, err)
	return got.GetLabels()["tier"]
}

// TestProgressiveUpdateOnRealClusters: a logical cloud on three real
// clusters, updated one cluster at a time, with the second cluster's API
// server refusing the change (an admission policy): the update pauses
// after that failure, the third cluster keeps the previous generation,
// resume is refused unless paused, and a rollback restores the previous
// generation on every cluster the update reached.
func TestProgressiveUpdateOnRealClusters(t *testing.T) {
	r, h := onHarness(t, "stages")
	lc := "/v2/projects/stages/logical-clouds/stg"

	// A bad strategy is refused naming the field, and nothing is stored.
	for field, rollout := range map[string]string{
		"spec.rollout.strategy":        `{"strategy": "canary"}`,
		"spec.rollout.max-concurrency": `{"strategy": "progressive", "max-concurrency": "0%"}`,
		"spec.rollout.soak":            `{"strategy": "progressive", "soak": "forever"}`,
		"spec.rollout.max-failures":    `{"strategy": "progressive", "max-failures": -1}`,
	} {
		b := r.Want(400, "POST", "/v2/projects/stages/logical-clouds",
			`{"metadata": {"name": "stg"}, "spec": {"namespace": "stg-ns", "rollout": `+rollout+`}}`)
		require.Contains(t, b, field)
		r.Want(404, "GET", lc, "")
	}
	r.Want(201, "POST", "/v2/projects/stages/logical-clouds",
		`{"metadata": {"name": "stg"}, "spec": {"namespace": "stg-ns", "rollout": {"strategy": "progressive", "max-concurrency": "1", "max-failures": 0, "soak": "0s"}}}`)
	for _, c := range h.Clusters {
		r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider": "edge", "cluster-name": "`+c.Name+`"}`)
	}
	r.Want(202, "POST", lc+"/apply", "")
	r.Settle(lc, "Instantiated")
	var st stagedStatus
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/status", "")), &st))
	require.Equal(t, 3, st.Rollout.Wave, "one cluster per wave")
	require.Equal(t, 3, st.Rollout.Admitted)
	b := r.Want(409, "POST", lc+"/resume", "")
	require.Contains(t, b, "is Instantiated")
	require.Equal(t, "WRONG_STATE", decodeMap(t, b)["reason"])

	// The references' order is by provider and name: cluster-1, -2, -3.
	byName := map[string]*kubetest.Cluster{}
	for _, c := range h.Clusters {
		byName[c.Name] = c
	}
	denyTier(t, byName["cluster-2"], "stg-ns")
	r.Want(200, "PUT", lc, `{"metadata": {"name": "stg"}, "spec": {"labels": {"tier": "v2"}, "rollout": {"strategy": "progressive", "max-concurrency": "1", "max-failures": 0, "soak": "0s"}}}`)
	r.Want(202, "POST", lc+"/update", "")
	r.Settle(lc, "Paused")
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc+"/status", "")), &st))
	require.True(t, st.Rollout.Paused)
	require.Equal(t, []string{"edge/cluster-2"}, st.Rollout.Failed)
	require.Equal(t, 2, st.Rollout.Admitted)
	require.True(t, st.Rollout.RollbackAvailable)
	require.Equal(t, "v2", tierOf(t, byName["cluster-1"], "stg-ns"))
	require.Equal(t, "", tierOf(t, byName["cluster-2"], "stg-ns"), "refused")
	require.Equal(t, "", tierOf(t, byName["cluster-3"], "stg-ns"), "never reached: the previous generation")

	r.Want(202, "POST", lc+"/rollback", "")
	r.Settle(lc, "Instantiated")
	for name, c := range byName {
		require.Equal(t, "", tierOf(t, c, "stg-ns"), "%s holds the previous generation", name)
	}
	b = r.Want(409, "POST", lc+"/rollback", "")
	require.Contains(t, b, "no previous generation")
	require.Equal(t, "WRONG_STATE", decodeMap(t, b)["reason"])

	r.Want(202, "POST", lc+"/terminate", "")
	r.Settle(lc, "Terminated")
}

// TestTrafficGroupRolloutStrategy: a traffic intent group carries a
// rollout strategy, checked at create and PUT (400 naming the field,
// nothing stored); resume and rollback are refused naming the state when
// the group is not paused, in both URL spellings.
func TestTrafficGroupRolloutStrategy(t *testing.T) {
	t.Parallel()
	r := apitest.NewREST(t, stacktest.Start(t))
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"tg"}}`)
	r.Want(201, "POST", "/v2/projects/tg/logical-clouds", `{"metadata":{"name":"lc"}}`)
	const app = "/v2/projects/tg/rb/app/v1/traffic-intent-groups"
	field := func(body string) string {
		t.Helper()
		f, _ := decodeMap(t, r.Want(400, "POST", app, body))["field"].(string)
		return f
	}
	require.Equal(t, "rollout.max-concurrency", field(`{"name":"g","logical-cloud":"lc","rollout":{"strategy":"progressive","max-concurrency":"150%"}}`))
	require.Equal(t, "rollout.strategy", field(`{"name":"g","logical-cloud":"lc","rollout":{"strategy":"sometimes"}}`))
	r.Want(404, "GET", app+"/g", "")
	r.Want(201, "POST", app, `{"name":"g","logical-cloud":"lc","rollout":{"strategy":"progressive","max-concurrency":"50%","max-failures":1,"soak":"1m"}}`)
	g := decodeMap(t, r.Want(200, "GET", app+"/g", ""))
	require.Equal(t, map[string]any{"strategy": "progressive", "max-concurrency": "50%", "max-failures": float64(1), "soak": "1m", "order-by-label": ""},
		g["rollout"])
	b := r.Want(400, "PUT", app+"/g", `{"name":"g","rollout":{"strategy":"progressive","soak":"48h"}}`)
	require.Equal(t, "rollout.soak", decodeMap(t, b)["field"])
	require.Equal(t, "1m", decodeMap(t, r.Want(200, "GET", app+"/g", ""))["rollout"].(map[string]any)["soak"], "nothing stored")
	r.Want(200, "PUT", app+"/g", `{"name":"g","rollout":{"strategy":"all"}}`)
	require.Equal(t, "all", decodeMap(t, r.Want(200, "GET", app+"/g", ""))["rollout"].(map[string]any)["strategy"])

	for _, path := range []string{app + "/g", "/v2/project/tg/rb/app/v1/traffic-intent-sets/g"} {
		for _, verb := range []string{"resume", "rollback"} {
			b := r.Want(409, "POST", path+"/"+verb, "")
			require.Contains(t, b, `is Created`)
			require.Equal(t, "WRONG_STATE", decodeMap(t, b)["reason"])
		}
	}
}

// serviceEntryHosts are the hosts of the ServiceEntries of traffic group
// group in namespace ns on cluster c.
func serviceEntryHosts(t *testing.T, c *kubetest.Cluster, ns, group string) []string {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	list, err := dyn.Resource(serviceEntries).Namespace(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "traffic.dcm.io/group=" + group})
	require.NoError(t, err)
	var out []string
	for _, o := range list.Items {
		hosts, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "hosts")
		out = append(out, hosts...)
	}
	slices.Sort(out)
	return out
}

var serviceEntries = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "serviceentries"}

// TestProgressiveTrafficGroupOnRealClusters: a traffic intent group with a
// progressive rollout, on a mesh logical cloud of three real clusters,
// updated one cluster at a time while the second cluster refuses the new
// ServiceEntry (an admission policy): the group pauses, the third cluster
// keeps the previous ServiceEntry, and a rollback restores it on the
// first.
func TestProgressiveTrafficGroupOnRealClusters(t *testing.T) {
	r, h := onHarness(t, "pst")
	lc := "/v2/projects/pst/logical-clouds/mall"
	r.Want(201, "POST", "/v2/projects/pst/logical-clouds", apitest.MeshBody("mall"))
	byName := map[string]*kubetest.Cluster{}
	for _, c := range h.Clusters {
		byName[c.Name] = c
		r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider": "edge", "cluster-name": "`+c.Name+`"}`)
	}
	r.Want(202, "POST", lc+"/apply", "")
	r.Settle(lc, "Instantiated")

	base := "/v2/projects/pst/rb/mall/v1/"
	group := base + "traffic-intent-groups/g"
	r.Want(201, "POST", base+"traffic-intent-groups",
		`{"name": "g", "logical-cloud": "mall", "rollout": {"strategy": "progressive", "max-concurrency": "1", "soak": "0s"}}`)
	outbound := func(host string) string {
		return `{"description": "details reads books", "connectivityResource": [{"details": {"name": "details", "application": "mall",
			"egressgateway": "false", "mutualTLS": "true", "port": "9080", "serviceMesh": "istio",
			"clientServices": [{"clientServiceName": "` + host + `", "protocol": "HTTPS", "type": "external"}]}}]}`
	}
	r.Want(201, "POST", base+"intent/g/connectivity/external/outbound", outbound("books.example.org"))
	r.Want(202, "POST", group+"/apply", "")
	r.SettleTraffic(group, "Applied")
	for name, c := range byName {
		require.Equal(t, []string{"books.example.org"}, serviceEntryHosts(t, c, "mall-ns", "g"), name)
	}

	deny(t, byName["cluster-2"], "deny-blocked-host", "networking.istio.io", "*", "serviceentries",
		"!has(object.spec.hosts) || !object.spec.hosts.exists(h, h == 'blocked.example.org')",
		func(cfg *restclient.Config) bool {
			dyn, err := dynamic.NewForConfig(cfg)
			require.NoError(t, err)
			probe := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
				"metadata": map[string]any{"name": "probe", "namespace": "mall-ns"},
				"spec":     map[string]any{"hosts": []any{"blocked.example.org"}, "ports": []any{map[string]any{"number": int64(443), "name": "https", "protocol": "HTTPS"}}},
			}}
			_, err = dyn.Resource(serviceEntries).Namespace("mall-ns").Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return apierrors.IsInvalid(err)
		})
	r.Want(200, "PUT", base+"intent/g/connectivity/external/outbound/details", outbound("blocked.example.org"))
	r.Want(202, "POST", group+"/update", "")
	var st stagedStatus
	apitest.Eventually(t, "the group pauses", func() bool {
		require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", group+"/status", "")), &st))
		return st.State == "Paused"
	})
	require.Equal(t, []string{"edge/cluster-2"}, st.Rollout.Failed)
	require.Equal(t, 2, st.Rollout.Admitted)
	require.Equal(t, []string{"blocked.example.org"}, serviceEntryHosts(t, byName["cluster-1"], "mall-ns", "g"))
	// Refused there; the old entry (named after its host) was deleted as
	// the pass went on: a failed cluster is what the update left.
	require.NotContains(t, serviceEntryHosts(t, byName["cluster-2"], "mall-ns", "g"), "blocked.example.org", "refused")
	require.Equal(t, []string{"books.example.org"}, serviceEntryHosts(t, byName["cluster-3"], "mall-ns", "g"), "never reached")

	r.Want(202, "POST", group+"/rollback", "")
	r.SettleTraffic(group, "Applied")
	for name, c := range byName {
		require.Equal(t, []string{"books.example.org"}, serviceEntryHosts(t, c, "mall-ns", "g"), name)
	}
	r.Want(202, "POST", group+"/terminate", "")
	r.SettleTraffic(group, "Terminated")
	r.Want(202, "POST", lc+"/terminate", "")
	r.Settle(lc, "Terminated")
}
