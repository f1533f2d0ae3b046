package rsync_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	k8scorev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kubetest"
)

// refs names harness clusters by index.
func refs(h *kubetest.Harness, clusters ...int) []*rsyncv1.ClusterRef {
	out := make([]*rsyncv1.ClusterRef, len(clusters))
	for i, c := range clusters {
		out[i] = &rsyncv1.ClusterRef{Provider: "edge", Cluster: h.Clusters[c].Name}
	}
	return out
}

// ownership is a GetObjectOwners answer as "STATE owner" per cluster.
func ownership(r *rsyncv1.GetObjectOwnersResponse) []string {
	var out []string
	for _, c := range r.GetClusters() {
		out = append(out, fmt.Sprintf("%s %s", c.GetState(), c.GetOwner()))
	}
	return out
}

func TestObjectOwnersOnRealClusters(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	c := serveWithEngine(t)
	registerHarness(t, c, h)
	ctx := context.Background()
	const a, b = "lc/p/owners-a", "lc/p/owners-b"
	ns := `{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "owners-a"}}`
	_, err := c.SubmitRollout(ctx, &rsyncv1.SubmitRolloutRequest{Owner: a, Clusters: []*rsyncv1.ClusterResources{
		{Provider: "edge", Cluster: "cluster-1", Resources: resources(ns)}, {Provider: "edge", Cluster: "cluster-2", Resources: resources(ns)}}})
	require.NoError(t, err)
	last, _ := settle(t, c, a)
	require.Equal(t, rsyncv1.State_STATE_APPLIED, last.GetState())
	// Another DCM's object, not in this one's record: its annotation says whose.
	cs := kubeClient(t, h.Clusters[0])
	_, err = cs.CoreV1().Namespaces().Create(ctx, &k8scorev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "owners-elsewhere", Annotations: map[string]string{"dcm.io/owner": "lc/x/y"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), "owners-elsewhere", metav1.DeleteOptions{})
	})

	cases := []struct {
		name             string
		owner            string
		apiVersion, kind string
		namespace, obj   string
		want             []string
	}{
		{"its own", a, "v1", "Namespace", "", "owners-a", []string{"OWNERSHIP_OWNED lc/p/owners-a", "OWNERSHIP_OWNED lc/p/owners-a", "OWNERSHIP_FREE "}},
		{"another owner's", b, "v1", "Namespace", "", "owners-a", []string{"OWNERSHIP_OTHER_OWNER lc/p/owners-a", "OWNERSHIP_OTHER_OWNER lc/p/owners-a", "OWNERSHIP_FREE "}},
		{"not DCM's", b, "v1", "Namespace", "", "default", []string{"OWNERSHIP_UNMANAGED ", "OWNERSHIP_UNMANAGED ", "OWNERSHIP_UNMANAGED "}},
		{"annotated elsewhere", b, "v1", "Namespace", "", "owners-elsewhere", []string{"OWNERSHIP_OTHER_OWNER lc/x/y", "OWNERSHIP_FREE ", "OWNERSHIP_FREE "}},
		{"missing", a, "v1", "ConfigMap", "owners-a", "nothing", []string{"OWNERSHIP_FREE ", "OWNERSHIP_FREE ", "OWNERSHIP_FREE "}},
		{"unserved kind", a, "dcm.io/v1", "Gadget", "owners-a", "g", []string{"OWNERSHIP_FREE ", "OWNERSHIP_FREE ", "OWNERSHIP_FREE "}},
		{"cluster-scoped RBAC", b, "rbac.authorization.k8s.io/v1", "ClusterRole", "", "admin", []string{"OWNERSHIP_UNMANAGED ", "OWNERSHIP_UNMANAGED ", "OWNERSHIP_UNMANAGED "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.GetObjectOwners(ctx, &rsyncv1.GetObjectOwnersRequest{Owner: tc.owner, ApiVersion: tc.apiVersion, Kind: tc.kind,
				Namespace: tc.namespace, Name: tc.obj, Clusters: refs(h, 0, 1, 2)})
			require.NoError(t, err)
			require.Equal(t, tc.want, ownership(r))
			for i, cl := range r.GetClusters() {
				require.Equal(t, h.Clusters[i].Name, cl.GetCluster(), "in the order asked")
				require.Empty(t, cl.GetError())
			}
		})
	}

	t.Run("unreachable cluster", func(t *testing.T) {
		down := h.Clusters[2]
		down.StopAPIServer()
		defer func() { require.NoError(t, down.StartAPIServer(context.Background())) }()
		r, err := c.GetObjectOwners(ctx, &rsyncv1.GetObjectOwnersRequest{Owner: b, ApiVersion: "v1", Kind: "Namespace", Name: "owners-a",
			Clusters: refs(h, 0, 2)})
		require.NoError(t, err)
		require.Equal(t, []string{"OWNERSHIP_OTHER_OWNER lc/p/owners-a", "OWNERSHIP_UNKNOWN "}, ownership(r))
		require.Contains(t, r.GetClusters()[1].GetError(), "connection refused")
	})

	t.Run("bad input names the field", func(t *testing.T) {
		good := func() *rsyncv1.GetObjectOwnersRequest {
			return &rsyncv1.GetObjectOwnersRequest{Owner: a, ApiVersion: "v1", Kind: "ConfigMap", Namespace: "owners-a", Name: "x", Clusters: refs(h, 0)}
		}
		cases := map[string]struct {
			change func(*rsyncv1.GetObjectOwnersRequest)
			field  string
		}{
			"no owner":              {func(r *rsyncv1.GetObjectOwnersRequest) { r.Owner = "" }, "owner"},
			"bad owner":             {func(r *rsyncv1.GetObjectOwnersRequest) { r.Owner = "LC/Upper" }, "owner"},
			"no apiVersion":         {func(r *rsyncv1.GetObjectOwnersRequest) { r.ApiVersion = "" }, "apiVersion"},
			"bad apiVersion":        {func(r *rsyncv1.GetObjectOwnersRequest) { r.ApiVersion = "a/b/c" }, "apiVersion"},
			"no kind":               {func(r *rsyncv1.GetObjectOwnersRequest) { r.Kind = "" }, "kind"},
			"lowercase kind":        {func(r *rsyncv1.GetObjectOwnersRequest) { r.Kind = "configmap" }, "kind"},
			"no name":               {func(r *rsyncv1.GetObjectOwnersRequest) { r.Name = "" }, "name"},
			"bad namespace":         {func(r *rsyncv1.GetObjectOwnersRequest) { r.Namespace = "Bad_NS" }, "namespace"},
			"namespaced, none":      {func(r *rsyncv1.GetObjectOwnersRequest) { r.Namespace = "" }, "namespace"},
			"no clusters":           {func(r *rsyncv1.GetObjectOwnersRequest) { r.Clusters = nil }, "clusters"},
			"no provider":           {func(r *rsyncv1.GetObjectOwnersRequest) { r.Clusters[0].Provider = "" }, "clusters[0].provider"},
			"cluster twice":         {func(r *rsyncv1.GetObjectOwnersRequest) { r.Clusters = refs(h, 0, 1, 0) }, "clusters[2]"},
			"unregistered cluster":  {func(r *rsyncv1.GetObjectOwnersRequest) { r.Clusters[0].Cluster = "nowhere" }, "clusters[0]"},
			"unregistered provider": {func(r *rsyncv1.GetObjectOwnersRequest) { r.Clusters[0].Provider = "nobody" }, "clusters[0]"},
		}
		for name, tc := range cases {
			req := good()
			tc.change(req)
			_, err := c.GetObjectOwners(ctx, req)
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", name, err)
			require.Equal(t, tc.field, errs.FieldOf(status.Convert(err)), "%s: %v", name, err)
		}
	})

	_, err = c.DeleteRollout(ctx, &rsyncv1.DeleteRolloutRequest{Owner: a})
	require.NoError(t, err)
	last, _ = settle(t, c, a)
	require.Equal(t, rsyncv1.State_STATE_DELETED, last.GetState())
	r, err := c.GetObjectOwners(ctx, &rsyncv1.GetObjectOwnersRequest{Owner: b, ApiVersion: "v1", Kind: "Namespace", Name: "owners-a", Clusters: refs(h, 0, 1)})
	require.NoError(t, err)
	require.Equal(t, []string{"OWNERSHIP_FREE ", "OWNERSHIP_FREE "}, ownership(r), "free again once its owner deleted it")
}

// TestDeleteClusterLeavesTenantObjects removes a cluster from the registry
// while a rollout has objects on it: nothing on the cluster changes, then
// or when the rollout is deleted, which settles with them orphaned.
func TestDeleteClusterLeavesTenantObjects(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	c := serveWithEngine(t)
	registerHarness(t, c, h)
	ctx := context.Background()
	const owner, ns = "lc/p/registry", "registry-tenant"
	kc := h.Clusters[2]
	cs := kubeClient(t, kc)
	manifests := []string{
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": %q}}`, ns),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "data", "namespace": %q}, "data": {"k": "v"}}`, ns),
	}
	_, err := c.SubmitRollout(ctx, &rsyncv1.SubmitRolloutRequest{Owner: owner, Clusters: []*rsyncv1.ClusterResources{
		{Provider: "edge", Cluster: kc.Name, Resources: resources(manifests...)}}})
	require.NoError(t, err)
	last, _ := settle(t, c, owner)
	require.Equal(t, rsyncv1.State_STATE_APPLIED, last.GetState())
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	snapshot := func() string {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "data", metav1.GetOptions{})
		require.NoError(t, err)
		js, err := json.Marshal([]any{n, cm})
		require.NoError(t, err)
		return string(js)
	}
	before := snapshot()

	_, err = c.DeleteCluster(ctx, &rsyncv1.DeleteClusterRequest{Provider: "edge", Name: kc.Name})
	require.NoError(t, err)
	require.Equal(t, before, snapshot(), "unregistering a cluster touches nothing on it")

	_, err = c.DeleteRollout(ctx, &rsyncv1.DeleteRolloutRequest{Owner: owner})
	require.NoError(t, err)
	last, _ = settle(t, c, owner)
	require.Equal(t, rsyncv1.State_STATE_ORPHANED, last.GetState(), "the cluster is no longer registered: what is there is orphaned")
	require.Contains(t, last.GetClusters()[0].GetLastError(), "deleted from the registry")
	require.Equal(t, before, snapshot(), "nor does deleting the rollout of an unregistered cluster")
	_, err = c.GetObjectOwners(ctx, &rsyncv1.GetObjectOwnersRequest{Owner: owner, ApiVersion: "v1", Kind: "Namespace", Name: ns,
		Clusters: []*rsyncv1.ClusterRef{{Provider: "edge", Cluster: kc.Name}}})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "an unregistered cluster: %v", err)
}
