package quota_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/coretest"
	"github.com/dcm-project/dcm/platform/kube"
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

func TestRenderQuotas(t *testing.T) {
	t.Parallel()
	def, err := kube.ParseHardText("DCM_DEFAULT_QUOTA", "cpu=8,memory=32Gi")
	require.NoError(t, err)
	core := coretest.New()
	c := quotav1.NewQuotaServiceClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		return []server.Service{quota.New(st, core, def)}
	}))
	ctx := context.Background()
	core.Add("p", "lc", kube.LevelStandard, "ns-1")
	core.Add("p", "adm", kube.LevelAdmin, "")
	render := func(lc string) *quotav1.RenderQuotasResponse {
		t.Helper()
		r, err := c.RenderQuotas(ctx, &quotav1.RenderQuotasRequest{Project: "p", LogicalCloud: lc})
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
	require.Equal(t, map[string]string{"cpu": "8", "memory": "32Gi"}, decode(r)[0].Spec.Hard)

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
	require.Equal(t, map[string]string{"requests.nvidia.com/gpu": "2", "limits.cpu": "4"}, decode(r)[1].Spec.Hard, "dotted names, canonical quantities")
	require.Equal(t, r.GetManifests(), render("lc").GetManifests(), "byte-identical")

	_, err = c.RenderQuotas(ctx, &quotav1.RenderQuotasRequest{Project: "p", LogicalCloud: "adm"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	_, err = c.RenderQuotas(ctx, &quotav1.RenderQuotasRequest{Project: "p", LogicalCloud: "missing"})
	require.Equal(t, codes.NotFound, status.Code(err))
}
