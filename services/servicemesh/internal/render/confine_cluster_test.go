package render_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/kubetest/istiotest"
	"github.com/dcm-project/dcm/services/servicemesh/internal/render"
)

// kubeHTTP is a request to a test cluster's API server.
type kubeHTTP struct {
	t      *testing.T
	ctx    context.Context
	server string
	c      *http.Client
	token  string // "" : the client's own credential (admin)
}

func (k kubeHTTP) do(method, path, contentType, body string) (int, string) {
	k.t.Helper()
	req, err := http.NewRequestWithContext(k.ctx, method, k.server+path, strings.NewReader(body))
	require.NoError(k.t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if k.token != "" {
		req.Header.Set("Authorization", "Bearer "+k.token)
	}
	resp, err := k.c.Do(req)
	require.NoError(k.t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(k.t, err)
	return resp.StatusCode, string(b)
}

// tokenClient is an HTTPS client trusting the cluster's CA with no client
// certificate: the bearer token is the only credential.
func tokenClient(t *testing.T, admin *http.Client) *http.Client {
	t.Helper()
	cfg := admin.Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.Certificates = nil
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
}

// TestConfinedOnCluster (issue 29, findings 3 and 4 and the mesh's quota):
// a logical cloud's rendered RBAC, NetworkPolicies, ResourceQuota and
// LimitRange are applied for real to an API server, then:
//   - istiod's ServiceAccount, with a token of its own (TokenRequest), is
//     refused reading or listing Secrets of another namespace (and of the
//     cluster), creating a Deployment in kube-system, patching another
//     tenant's webhook configuration, reading another namespace's
//     ConfigMaps or writing a GatewayClass; it may still patch its own
//     webhook, write istio-ca-root-cert in its workload namespace and list
//     that ConfigMap by name across the cluster (SubjectAccessReviews
//     agree). The gateways' and the reader's ServiceAccounts read no Secret.
//   - the NetworkPolicies are admitted, and the namespaces their selector
//     admits are exactly the logical cloud's two;
//   - the quota admits istiod and the three gateways at their autoscalers'
//     caps plus one more pod each (a rolling update), and refuses one more.
func TestConfinedOnCluster(t *testing.T) {
	h := kubetest.ForTests(t, 1)
	c := h.Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hc, err := c.HTTPClient()
	require.NoError(t, err)
	admin := kubeHTTP{t: t, ctx: ctx, server: c.Server, c: hc}
	in := input("smconf", "cf1", "cf1-istio-system")
	out, err := render.Render(in)
	require.NoError(t, err)

	var cleanup []string // paths to delete, in order
	t.Cleanup(func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			req, _ := http.NewRequest(http.MethodDelete, c.Server+cleanup[i], nil)
			if resp, err := hc.Do(req); err == nil {
				_ = resp.Body.Close()
			}
		}
	})
	applyReal := func(manifest string) {
		t.Helper()
		require.NoError(t, c.Apply(ctx, []byte(manifest), kubetest.ApplyOptions{Strict: true, FieldManager: "dcm-servicemesh-test"}), manifest[:min(200, len(manifest))])
	}
	// The other tenant: a namespace with a Secret and a ConfigMap, and a
	// webhook configuration of its own.
	for _, m := range []string{
		kube.Manifest("v1", "Namespace", kube.Meta{Name: in.WorkloadNamespace, Labels: kube.Labels(in.Project, in.LogicalCloud)}, nil),
		kube.Manifest("v1", "Namespace", kube.Meta{Name: "cf-other", Labels: kube.Labels("smconf-other", "cf1")}, nil),
		kube.Manifest("v1", "Secret", kube.Meta{Name: "db-password", Namespace: "cf-other"}, map[string]any{"stringData": map[string]any{"password": "hunter2"}}),
		kube.Manifest("v1", "ConfigMap", kube.Meta{Name: "settings", Namespace: "cf-other"}, map[string]any{"data": map[string]any{"k": "v"}}),
		kube.Manifest("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", kube.Meta{Name: "cf-other-injector"}, nil),
	} {
		applyReal(m)
	}
	cleanup = append(cleanup, "/api/v1/namespaces/"+in.WorkloadNamespace, "/api/v1/namespaces/cf-other",
		"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/cf-other-injector")

	// The rendered objects that hold rights, policies and quota, for real;
	// the webhook configurations by name only (no webhook: nothing of them
	// may intercept the shared cluster's requests).
	var mutating, deployments []map[string]any
	for _, m := range out[0].Manifests {
		o := parse(t, m.JSON)
		switch o.Kind {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
			"NetworkPolicy", "ResourceQuota", "LimitRange":
			applyReal(m.JSON)
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			applyReal(kube.Manifest("admissionregistration.k8s.io/v1", o.Kind, kube.Meta{Name: o.Metadata.Name}, nil))
			if o.Kind == "MutatingWebhookConfiguration" {
				mutating = append(mutating, o.raw)
			}
		case "Deployment":
			deployments = append(deployments, o.raw)
		default:
			continue
		}
		switch o.Kind {
		case "Namespace":
			cleanup = append(cleanup, "/api/v1/namespaces/"+o.Metadata.Name)
		case "ClusterRole", "ClusterRoleBinding":
			cleanup = append(cleanup, "/apis/rbac.authorization.k8s.io/v1/"+strings.ToLower(o.Kind)+"s/"+o.Metadata.Name)
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			cleanup = append(cleanup, "/apis/admissionregistration.k8s.io/v1/"+strings.ToLower(o.Kind)+"s/"+o.Metadata.Name)
		}
	}
	require.Len(t, mutating, 1)
	ownHook := mutating[0]["metadata"].(map[string]any)["name"].(string)

	t.Run("istiod's token", func(t *testing.T) {
		sa := "istiod-" + in.Revision
		token, err := istiotest.ServiceAccountToken(ctx, c, in.IstioNamespace, sa, "https://kubernetes.default.svc")
		require.NoError(t, err)
		as := kubeHTTP{t: t, ctx: ctx, server: c.Server, c: tokenClient(t, hc), token: token}
		for _, tc := range []struct {
			what, method, path, body string
			want                     int
		}{
			{"read another namespace's Secret", "GET", "/api/v1/namespaces/cf-other/secrets/db-password", "", 403},
			{"list another namespace's Secrets", "GET", "/api/v1/namespaces/cf-other/secrets", "", 403},
			{"list every Secret", "GET", "/api/v1/secrets", "", 403},
			{"create a Deployment in kube-system", "POST", "/apis/apps/v1/namespaces/kube-system/deployments?dryRun=All",
				`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}`, 403},
			{"patch another webhook configuration", "PATCH", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/cf-other-injector",
				`{"metadata":{"labels":{"pwned":"yes"}}}`, 403},
			{"read another namespace's ConfigMap", "GET", "/api/v1/namespaces/cf-other/configmaps/settings", "", 403},
			{"list every ConfigMap", "GET", "/api/v1/configmaps", "", 403},
			{"write istio-ca-root-cert in another namespace", "POST", "/api/v1/namespaces/cf-other/configmaps",
				`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"istio-ca-root-cert"}}`, 403},
			{"create a GatewayClass", "POST", "/apis/gateway.networking.k8s.io/v1/gatewayclasses", `{}`, 403},
			// What istiod needs, still there.
			{"patch its own webhook configuration", "PATCH", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/" + ownHook,
				`{"metadata":{"labels":{"patched-by-istiod":"yes"}}}`, 200},
			{"list istio-ca-root-cert across the cluster", "GET", "/api/v1/configmaps?fieldSelector=" + url.QueryEscape("metadata.name=istio-ca-root-cert"), "", 200},
			{"write istio-ca-root-cert in its workload namespace", "POST", "/api/v1/namespaces/" + in.WorkloadNamespace + "/configmaps",
				`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"istio-ca-root-cert"},"data":{"root-cert.pem":"x"}}`, 201},
			{"read its mesh config", "GET", "/api/v1/namespaces/" + in.IstioNamespace + "/configmaps?fieldSelector=" + url.QueryEscape("metadata.name=istio-"+in.Revision), "", 200},
			{"read its cacerts", "GET", "/api/v1/namespaces/" + in.IstioNamespace + "/secrets/cacerts", "", 404}, // allowed; not applied here
			{"list pods (discovery)", "GET", "/api/v1/pods", "", 200},
		} {
			ct := "application/json"
			if tc.method == "PATCH" {
				ct = "application/merge-patch+json"
			}
			got, body := as.do(tc.method, tc.path, ct, tc.body)
			// assert: every case is reported, not the first alone.
			assert.Equal(t, tc.want, got, "%s: %s %s: %.200s", tc.what, tc.method, tc.path, body)
			t.Logf("istiod: %s: %d", tc.what, got)
		}
	})

	t.Run("SubjectAccessReviews", func(t *testing.T) {
		type attrs = map[string]any
		check := func(user string, a attrs) bool {
			t.Helper()
			body, _ := json.Marshal(map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
				"spec": map[string]any{"user": user, "groups": []string{"system:serviceaccounts", "system:authenticated"}, "resourceAttributes": a}})
			code, resp := admin.do("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", "application/json", string(body))
			require.Equal(t, 201, code, resp)
			var r struct {
				Status struct{ Allowed bool } `json:"status"`
			}
			require.NoError(t, json.Unmarshal([]byte(resp), &r))
			return r.Status.Allowed
		}
		sa := func(name string) string { return "system:serviceaccount:" + in.IstioNamespace + ":" + name }
		istiod := sa("istiod-" + in.Revision)
		for _, tc := range []struct {
			user string
			a    attrs
			want bool
		}{
			{istiod, attrs{"verb": "get", "resource": "secrets", "namespace": "cf-other", "name": "db-password"}, false},
			{istiod, attrs{"verb": "list", "resource": "secrets"}, false},
			{istiod, attrs{"verb": "watch", "resource": "secrets", "namespace": "cf-other"}, false},
			{istiod, attrs{"verb": "create", "group": "apps", "resource": "deployments", "namespace": "kube-system"}, false},
			{istiod, attrs{"verb": "patch", "group": "admissionregistration.k8s.io", "resource": "mutatingwebhookconfigurations", "name": "cf-other-injector"}, false},
			{istiod, attrs{"verb": "update", "group": "admissionregistration.k8s.io", "resource": "validatingwebhookconfigurations", "name": "istiod-default-validator"}, false},
			{istiod, attrs{"verb": "update", "group": "networking.k8s.io", "resource": "ingresses", "subresource": "status", "namespace": "cf-other"}, false},
			{istiod, attrs{"verb": "create", "group": "networking.istio.io", "resource": "workloadentries", "namespace": "cf-other"}, false},
			{istiod, attrs{"verb": "patch", "group": "admissionregistration.k8s.io", "resource": "mutatingwebhookconfigurations", "name": ownHook}, true},
			{istiod, attrs{"verb": "create", "resource": "configmaps", "namespace": in.WorkloadNamespace}, true},
			{istiod, attrs{"verb": "create", "group": "networking.istio.io", "resource": "workloadentries", "namespace": in.WorkloadNamespace}, true},
			{istiod, attrs{"verb": "create", "group": "authentication.k8s.io", "resource": "tokenreviews"}, true},
			{sa(render.IngressGateway), attrs{"verb": "list", "resource": "secrets", "namespace": in.IstioNamespace}, false},
			{sa(render.EastWestGateway), attrs{"verb": "get", "resource": "secrets", "namespace": in.IstioNamespace, "name": "cacerts"}, false},
			{sa("istio-reader-service-account"), attrs{"verb": "list", "resource": "secrets"}, false},
			{sa("istio-reader-service-account"), attrs{"verb": "list", "resource": "configmaps"}, false},
		} {
			got := check(tc.user, tc.a)
			assert.Equal(t, tc.want, got, "%s %v", tc.user, tc.a)
			t.Logf("SAR %s %v: allowed=%v", strings.TrimPrefix(tc.user, "system:serviceaccount:"), tc.a, got)
		}
	})

	t.Run("NetworkPolicies", func(t *testing.T) {
		code, body := admin.do("GET", "/apis/networking.k8s.io/v1/namespaces/"+in.IstioNamespace+"/networkpolicies", "", "")
		require.Equal(t, 200, code, body)
		var list struct {
			Items []struct {
				Metadata struct{ Name string }
				Spec     struct {
					Ingress []struct {
						From []struct {
							NamespaceSelector *struct {
								MatchLabels map[string]string `json:"matchLabels"`
							} `json:"namespaceSelector"`
						}
						Ports []struct{ Port int }
					}
				}
			}
		}
		require.NoError(t, json.Unmarshal([]byte(body), &list))
		names := map[string]bool{}
		for _, p := range list.Items {
			names[p.Metadata.Name] = true
			if p.Metadata.Name != render.NetpolIstiod {
				continue
			}
			require.Len(t, p.Spec.Ingress, 2)
			ports := func(i int) []int {
				var out []int
				for _, p := range p.Spec.Ingress[i].Ports {
					out = append(out, p.Port)
				}
				return out
			}
			require.ElementsMatch(t, []int{15010, 15012, 15014, 8080}, ports(0))
			require.Len(t, p.Spec.Ingress[0].From, 1)
			sel := p.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels
			// The namespaces the selector admits: the logical cloud's two.
			q := url.Values{"labelSelector": {fmt.Sprintf("%s=%s,%s=%s", kube.ProjectLabel, sel[kube.ProjectLabel], kube.LogicalCloudLabel, sel[kube.LogicalCloudLabel])}}
			code, nsBody := admin.do("GET", "/api/v1/namespaces?"+q.Encode(), "", "")
			require.Equal(t, 200, code)
			var nss struct {
				Items []struct{ Metadata struct{ Name string } }
			}
			require.NoError(t, json.Unmarshal([]byte(nsBody), &nss))
			var got []string
			for _, n := range nss.Items {
				got = append(got, n.Metadata.Name)
			}
			require.ElementsMatch(t, []string{in.IstioNamespace, in.WorkloadNamespace}, got, "istiod's 15010/15012 admit these namespaces only")
			require.Equal(t, []int{15017}, ports(1), "the webhook port for the API server")
			require.Empty(t, p.Spec.Ingress[1].From)
		}
		for _, n := range []string{render.NetpolDefaultDeny, render.NetpolIstiod, render.NetpolEastWest, render.NetpolIngress, render.NetpolEgress} {
			require.True(t, names[n], "NetworkPolicy %s admitted", n)
		}
	})

	t.Run("quota", func(t *testing.T) {
		// The quota controller fills the status in (until then pods are
		// refused as "status unknown").
		deadline := time.Now().Add(time.Minute)
		for {
			code, body := admin.do("GET", "/api/v1/namespaces/"+in.IstioNamespace+"/resourcequotas/"+render.QuotaName, "", "")
			require.Equal(t, 200, code, body)
			if strings.Contains(body, `"status":{"hard"`) {
				break
			}
			require.True(t, time.Now().Before(deadline), "quota status not filled in: %s", body)
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
		createPod := func(d map[string]any, i int) (int, string) {
			tpl := d["spec"].(map[string]any)["template"].(map[string]any)
			md, _ := tpl["metadata"].(map[string]any)
			meta := map[string]any{"name": fmt.Sprintf("%s-%d", d["metadata"].(map[string]any)["name"], i)}
			if md != nil {
				meta["labels"], meta["annotations"] = md["labels"], md["annotations"]
			}
			pod, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tpl["spec"]})
			return admin.do("POST", "/api/v1/namespaces/"+in.IstioNamespace+"/pods", "application/json", string(pod))
		}
		require.Len(t, deployments, 4)
		n := 0
		for _, d := range deployments {
			replicas := render.GatewayMaxReplicas
			if strings.HasPrefix(d["metadata"].(map[string]any)["name"].(string), "istiod-") {
				replicas = render.IstiodMaxReplicas
			}
			for i := range replicas + 1 {
				code, body := createPod(d, i)
				require.Equal(t, 201, code, "pod %d of %s: %s", i, d["metadata"].(map[string]any)["name"], body)
				n++
			}
		}
		t.Logf("%d pods admitted: istiod and three gateways at their caps plus one each", n)
		code, body := createPod(deployments[0], 99)
		require.Equal(t, 403, code, body)
		require.Contains(t, body, "exceeded quota")
		t.Logf("one more: %d %s", code, body[:min(300, len(body))])
		// The LimitRange caps a container.
		big := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"big"},"spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"cpu":"8"}}}]}}`
		code, body = admin.do("POST", "/api/v1/namespaces/"+in.IstioNamespace+"/pods?dryRun=All", "application/json", big)
		require.Equal(t, 403, code, body)
		require.Contains(t, body, "maximum cpu usage per Container is 2")
	})
}
