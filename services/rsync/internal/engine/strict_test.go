package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// TestApplyIsStrict: rsync applies with fieldValidation=Strict, so a field
// the API server does not know is refused (400), not dropped with a
// warning. A manifest is applied as written or not at all.
func TestApplyIsStrict(t *testing.T) {
	h := kubetest.ForTests(t, 1)
	c := h.Clusters[0]
	k, err := engine.NewKube(c.Kubeconfig)
	require.NoError(t, err)
	ctx := context.Background()
	const manager = "dcm/lc/p/strict"
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "strict-apply"}}}
	_, err = k.Apply(ctx, ns, manager, false)
	require.NoError(t, err)

	for name, obj := range map[string]map[string]any{
		"unknown top-level field": {"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "unknown-field", "namespace": "strict-apply"},
			"data":     map[string]any{"a": "b"}, "bogus": map[string]any{"x": "y"}},
		"unknown spec field": {"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "unknown-spec", "namespace": "strict-apply"},
			"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}},
				"externalIPz": []any{"203.0.113.7"}}},
	} {
		u := &unstructured.Unstructured{Object: obj}
		_, err := k.Apply(ctx, u, manager, false)
		require.Error(t, err, name)
		require.True(t, apierrors.IsBadRequest(err) || apierrors.IsInvalid(err), "%s: %v", name, err)
		require.Contains(t, err.Error(), "unknown field", name)
		_, err = k.Create(ctx, u, manager)
		require.Error(t, err, "%s: create", name)
		_, err = k.Get(ctx, u.GroupVersionKind(), "strict-apply", u.GetName())
		require.True(t, apierrors.IsNotFound(err), "%s: nothing applied: %v", name, err)
	}
	// The same objects without the unknown field apply.
	good := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "known", "namespace": "strict-apply"}, "data": map[string]any{"a": "b"}}}
	_, err = k.Apply(ctx, good, manager, false)
	require.NoError(t, err)
}
