package quota_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// TestScopesAsKubernetesJudges holds the quota service's scope rules to a
// real API server's: each spec below (Kubernetes' ResourceQuotaSpec, as
// seed 002 gives it) is created on the cluster (dry run) as it is, and the
// cluster accepts it exactly when the service does; what the service
// accepts, it renders, and the cluster accepts the rendered ResourceQuota
// too.
func TestScopesAsKubernetesJudges(t *testing.T) {
	h := kubetest.ForTests(t, 1)
	client, err := h.Clusters[0].HTTPClient()
	require.NoError(t, err)
	server := h.Clusters[0].Server
	post := func(path string, body []byte) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, server+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer func() { require.NoError(t, resp.Body.Close()) }()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(out)
	}
	const ns = "quota-scopes-judge"
	if code, body := post("/api/v1/namespaces", []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"`+ns+`"}}`)); code != http.StatusConflict {
		require.Equal(t, http.StatusCreated, code, body)
	}
	dryRun := func(manifest []byte) (int, string) {
		t.Helper()
		return post("/api/v1/namespaces/"+ns+"/resourcequotas?dryRun=All", manifest)
	}
	c, internal := quotaService(t, "", "")
	ctx := context.Background()
	expr := func(scope, op string, values ...any) map[string]any {
		e := map[string]any{"scopeName": scope, "operator": op}
		if values != nil {
			e["values"] = values
		}
		return e
	}
	selector := func(exprs ...any) map[string]any { return map[string]any{"matchExpressions": exprs} }
	pods := map[string]any{"pods": "5"}
	compute := map[string]any{"pods": "5", "requests.cpu": "1", "limits.memory": "1Gi"}
	for i, spec := range []map[string]any{
		{"hard": compute, "scopeSelector": selector(expr("PriorityClass", "In", "high", "mid"))},
		{"hard": compute, "scopeSelector": selector(expr("PriorityClass", "NotIn", "low"))},
		{"hard": compute, "scopeSelector": selector(expr("PriorityClass", "Exists"))},
		{"hard": compute, "scopeSelector": selector(expr("PriorityClass", "DoesNotExist"))},
		{"hard": compute, "scopeSelector": selector(expr("PriorityClass", "In"))},
		{"hard": compute, "scopeSelector": selector(expr("PriorityClass", "NotIn"))},
		{"hard": compute, "scopeSelector": selector(expr("PriorityClass", "Exists", "x"))},
		{"hard": compute, "scopeSelector": selector(expr("PriorityClass", "DoesNotExist", "x"))},
		{"hard": compute, "scopeSelector": selector(expr("PriorityClass", "Matches", "x"))},
		{"hard": compute, "scopeSelector": selector(expr("Class", "In", "common"))},
		{"hard": compute, "scopeSelector": selector(expr("Terminating", "Exists"))},
		{"hard": compute, "scopeSelector": selector(expr("Terminating", "In", "x"))},
		{"hard": compute, "scopeSelector": selector(expr("NotBestEffort", "DoesNotExist"))},
		{"hard": compute, "scopeSelector": selector(expr("CrossNamespacePodAffinity", "Exists"))},
		{"hard": compute, "scopeSelector": selector(expr("CrossNamespacePodAffinity", "In", "x"))},
		{"hard": compute, "scopeSelector": selector(expr("Terminating", "Exists"), expr("NotTerminating", "Exists"))},
		{"hard": pods, "scopeSelector": selector(expr("BestEffort", "Exists"))},
		{"hard": compute, "scopeSelector": selector(expr("BestEffort", "Exists"))},
		{"hard": map[string]any{"services": "2"}, "scopeSelector": selector(expr("PriorityClass", "Exists"))},
		{"hard": map[string]any{"persistentvolumeclaims": "2", "requests.storage": "1Gi"}, "scopeSelector": selector(expr("VolumeAttributesClass", "In", "gold"))},
		{"hard": compute, "scopeSelector": selector(expr("VolumeAttributesClass", "In", "gold"))},
		{"hard": pods, "scopes": []any{"BestEffort"}},
		{"hard": compute, "scopes": []any{"BestEffort"}},
		{"hard": compute, "scopes": []any{"NotBestEffort", "Terminating"}},
		{"hard": pods, "scopes": []any{"BestEffort", "NotBestEffort"}},
		{"hard": pods, "scopes": []any{"Terminating", "NotTerminating"}},
		{"hard": pods, "scopes": []any{"Firewall"}},
		{"hard": compute, "scopes": []any{"PriorityClass"}},
		{"hard": map[string]any{"configmaps": "3"}, "scopes": []any{"NotTerminating"}},
		{"hard": map[string]any{"pods": "1", "requests.nvidia.com/gpu": "1"}, "scopes": []any{"BestEffort"}},
		{"hard": map[string]any{"pods": "1", "hugepages-2Mi": "1Gi"}, "scopes": []any{"NotBestEffort"}},
		{"hard": pods, "scopes": []any{"BestEffort"}, "scopeSelector": selector(expr("NotBestEffort", "Exists"))},
	} {
		name := fmt.Sprintf("q-%d", i)
		s, err := structpb.NewStruct(spec)
		require.NoError(t, err)
		_, _, _, verdict := kube.ParseQuotaSpec("spec", s)
		raw, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": map[string]any{"name": name}, "spec": spec})
		require.NoError(t, err)
		code, body := dryRun(raw)
		if verdict != nil {
			require.Equal(t, http.StatusUnprocessableEntity, code, "the service refuses %s (%v); the cluster answered %s", raw, verdict, body)
			continue
		}
		require.Equal(t, http.StatusCreated, code, "the service accepts %s; the cluster refused: %s", raw, body)
		_, err = c.CreateQuota(ctx, &quotav1.CreateQuotaRequest{Project: "p", LogicalCloud: "lc", Quota: &quotav1.Quota{
			Metadata: &typesv1.Metadata{Name: name}, Spec: s}})
		require.NoError(t, err, "%s", raw)
	}
	r, err := internal.RenderQuotas(ctx, &quotav1.RenderQuotasRequest{Project: "p", LogicalCloud: "lc", Level: kube.LevelStandard, Namespace: ns})
	require.NoError(t, err)
	require.NotEmpty(t, r.GetManifests())
	for _, m := range r.GetManifests() {
		code, body := dryRun([]byte(m))
		require.Equal(t, http.StatusCreated, code, "rendered %s: %s", m, body)
	}
}
