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

// TestApplyIsStrict: rsync writes objects with fieldValidation=Strict, so
// a field the API server does not know is refused, never dropped with a
// warning: a create without Strict would store the object without it
// (issue 29: a manifest is applied as written or not at all). A server-side
// apply the API server cannot type is refused too, and terminal (not
// retried).
func TestApplyIsStrict(t *testing.T) {
	h := kubetest.ForTests(t, 1)
	k, err := engine.NewKube(h.Clusters[0].Kubeconfig)
	require.NoError(t, err)
	ctx := context.Background()
	const manager, ns = "dcm/lc/p/strict", "strict-apply"
	_, err = k.Apply(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns}}}, manager, false)
	require.NoError(t, err)

	for name, obj := range map[string]map[string]any{
		"unknown top-level field": {"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "unknown-field", "namespace": ns},
			"data":     map[string]any{"a": "b"}, "bogus": map[string]any{"x": "y"}},
		"unknown spec field": {"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "unknown-spec", "namespace": ns},
			"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}},
				"externalIPz": []any{"203.0.113.7"}}},
	} {
		u := &unstructured.Unstructured{Object: obj}
		_, err := k.Create(ctx, u, manager)
		require.Error(t, err, "%s: create", name)
		require.True(t, apierrors.IsBadRequest(err), "%s: create: %v", name, err)
		require.Contains(t, err.Error(), "unknown field", name)
		_, err = k.Apply(ctx, u, manager, false)
		require.Error(t, err, "%s: apply", name)
		require.False(t, engine.Retryable(err), "%s: apply refused for good: %v", name, err)
		_, err = k.Get(ctx, u.GroupVersionKind(), ns, u.GetName())
		require.True(t, apierrors.IsNotFound(err), "%s: nothing written: %v", name, err)
	}
	good := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "known", "namespace": ns}, "data": map[string]any{"a": "b"}}}
	_, err = k.Apply(ctx, good, manager, false)
	require.NoError(t, err, "a manifest of known fields applies")
}
