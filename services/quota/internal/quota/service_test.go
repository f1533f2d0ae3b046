package quota_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/coretest"
	"github.com/dcm-project/dcm/platform/goldentest"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/quota/internal/quota"
)

// resourceQuota is the part of a rendered ResourceQuota the test reads.
type resourceQuota struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Hard map[string]string `json:"hard"`
	} `json:"spec"`
}

func TestDefaultWithinMaximum(t *testing.T) {
	t.Parallel()
	def, err := kube.ParseHardText("DCM_DEFAULT_QUOTA", "cpu=32")
	require.NoError(t, err)
	maximum, err := kube.ParseHardText("DCM_MAX_QUOTA", "cpu=16")
	require.NoError(t, err)
	_, err = quota.New(nil, coretest.New(), def, maximum)
	require.ErrorContains(t, err, "DCM_MAX_QUOTA")
}

func TestRenderQuotas(t *testing.T) {
	t.Parallel()
	def, err := kube.ParseHardText("DCM_DEFAULT_QUOTA", "cpu=8,memory=32Gi")
	require.NoError(t, err)
	maximum, err := kube.ParseHardText("DCM_MAX_QUOTA", "cpu=16,pods=50")
	require.NoError(t, err)
	core := coretest.New()
	conn := servertest.Serve(t, func(st *store.Store) []server.Service {
		svc, err := quota.New(st, core, def, maximum)
		require.NoError(t, err)
		return []server.Service{svc}
	})
	c, internal := quotav1.NewQuotaServiceClient(conn), quotav1.NewQuotaInternalServiceClient(conn)
	ctx := context.Background()
	core.Add("p", "lc", kube.LevelStandard, "ns-1")
	core.Add("p", "adm", kube.LevelAdmin, "")
	// renderAs renders as core does: what core holds goes in the request,
	// and core may not be called back meanwhile.
	renderAs := func(lc, level, ns string) (*quotav1.RenderQuotasResponse, error) {
		core.Forbid(t)
		defer core.Forbid(nil)
		return internal.RenderQuotas(ctx, &quotav1.RenderQuotasRequest{Project: "p", LogicalCloud: lc, Level: level, Namespace: ns})
	}
	render := func(lc string) *quotav1.RenderQuotasResponse {
		t.Helper()
		r, err := renderAs(lc, kube.LevelStandard, "ns-1")
		require.NoError(t, err)
		return r
	}
	decode := func(r *quotav1.RenderQuotasResponse) []resourceQuota {
		t.Helper()
		out := make([]resourceQuota, len(r.GetManifests()))
		for i, m := range r.GetManifests() {
			require.NoError(t, json.Unmarshal([]byte(m), &out[i]))
			require.Equal(t, "ResourceQuota", out[i].Kind)
			require.Equal(t, "ns-1", out[i].Metadata.Namespace)
			require.Equal(t, kube.Labels("p", "lc"), out[i].Metadata.Labels)
			require.Equal(t, r.GetNames()[i], out[i].Metadata.Name, "names in manifest order")
		}
		return out
	}

	r := render("lc")
	require.Equal(t, "ns-1", r.GetNamespace())
	require.Equal(t, []string{"default"}, r.GetNames(), "the default quota while the logical cloud has none")
	require.Equal(t, map[string]string{"cpu": "8", "memory": "32Gi", "pods": "50"}, decode(r)[0].Spec.Hard,
		"the default, and the maximum for what the default leaves out")

	for name, hard := range map[string]map[string]any{
		"gpus":    {"requests.nvidia.com/gpu": 2, "limits.cpu": "4000m"},
		"compute": {"pods": "10"},
	} {
		spec, err := structpb.NewStruct(hard)
		require.NoError(t, err)
		_, err = c.CreateQuota(ctx, &quotav1.CreateQuotaRequest{Project: "p", LogicalCloud: "lc", Quota: &quotav1.Quota{
			Metadata: &typesv1.Metadata{Name: name}, Spec: spec}})
		require.NoError(t, err)
	}
	r = render("lc")
	list, err := c.ListQuotas(ctx, &quotav1.ListQuotasRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	var listed []string
	for _, q := range list.GetQuotas() {
		listed = append(listed, q.GetMetadata().GetName())
	}
	require.Equal(t, []string{"compute", "gpus"}, r.GetNames())
	require.Equal(t, listed, r.GetNames(), "what ListQuotas shows")
	require.Equal(t, map[string]string{"requests.nvidia.com/gpu": "2", "limits.cpu": "4", "cpu": "8", "memory": "32Gi", "pods": "50"},
		decode(r)[1].Spec.Hard, "dotted names, canonical quantities, laid over the default")
	require.Equal(t, map[string]string{"cpu": "8", "memory": "32Gi", "pods": "10"}, decode(r)[0].Spec.Hard, "the quota's own pods win")
	require.Equal(t, r.GetManifests(), render("lc").GetManifests(), "byte-identical")
	golden(t, "render", r.GetManifests())

	// An empty quota bounds what the default does: never hard: null.
	_, err = c.CreateQuota(ctx, &quotav1.CreateQuotaRequest{Project: "p", LogicalCloud: "lc", Quota: &quotav1.Quota{
		Metadata: &typesv1.Metadata{Name: "empty"}, Spec: &structpb.Struct{}}})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"cpu": "8", "memory": "32Gi", "pods": "50"}, decode(render("lc"))[1].Spec.Hard)

	// Over the maximum: only an admin (or a service on its own).
	over, err := structpb.NewStruct(map[string]any{"cpu": "17"})
	require.NoError(t, err)
	for role, want := range map[string]codes.Code{pki.RoleProjectAdmin: codes.PermissionDenied, pki.RoleAdmin: codes.OK} {
		as := metadata.NewOutgoingContext(ctx, server.CallerMD(pki.Identity{Subject: "x", Role: role, Project: "p"}))
		_, err = c.CreateQuota(as, &quotav1.CreateQuotaRequest{Project: "p", LogicalCloud: "lc", Quota: &quotav1.Quota{
			Metadata: &typesv1.Metadata{Name: "big-" + role}, Spec: over}})
		require.Equal(t, want, status.Code(err), role)
		if err != nil {
			require.Contains(t, status.Convert(err).Message(), "quota.spec.cpu: 17 exceeds this installation's maximum 16")
		}
		_, err = c.UpdateQuota(as, &quotav1.UpdateQuotaRequest{Project: "p", LogicalCloud: "lc", Name: "compute", Quota: &quotav1.Quota{
			Metadata: &typesv1.Metadata{Name: "compute"}, Spec: over}})
		require.Equal(t, want, status.Code(err), role)
	}

	_, err = renderAs("adm", kube.LevelAdmin, "")
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	// A missing logical cloud: the renderer no longer asks core (core
	// renders only what it holds); a quota for it is refused after insert.
	_, err = c.CreateQuota(ctx, &quotav1.CreateQuotaRequest{Project: "p", LogicalCloud: "missing", Quota: &quotav1.Quota{
		Metadata: &typesv1.Metadata{Name: "q"}, Spec: &structpb.Struct{}}})
	require.Equal(t, codes.NotFound, status.Code(err))

	// The purge (core's cascade) never calls core either.
	core.Forbid(t)
	purged, err := internal.PurgeLogicalCloud(ctx, &quotav1.PurgeLogicalCloudRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Positive(t, purged.GetRemoved())
	core.Forbid(nil)
	list, err = c.ListQuotas(ctx, &quotav1.ListQuotasRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Len(t, list.GetQuotas(), 1, "the default quota only")
	require.Equal(t, "default", list.GetQuotas()[0].GetMetadata().GetName())
}

// golden compares manifests, one a line, with testdata/name.golden.
func golden(t *testing.T, name string, manifests []string) {
	t.Helper()
	goldentest.Manifests(t, name, manifests)
}
