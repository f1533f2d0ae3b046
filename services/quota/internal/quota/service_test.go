package quota_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/facts/factstest"
	"github.com/dcm-project/dcm/platform/goldentest"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
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
	_, err = quota.New(nil, def, maximum, quota.Defaults{})
	require.ErrorContains(t, err, "DCM_MAX_QUOTA")
}

func TestRenderQuotas(t *testing.T) {
	t.Parallel()
	def, err := kube.ParseHardText("DCM_DEFAULT_QUOTA", "cpu=8,memory=32Gi")
	require.NoError(t, err)
	maximum, err := kube.ParseHardText("DCM_MAX_QUOTA", "cpu=16,pods=50")
	require.NoError(t, err)
	core := factstest.New(t)
	conn := servertest.Serve(t, func(st *store.Store) []server.Service {
		svc, err := quota.New(keep(core, st, "quota"), def, maximum, quota.Defaults{})
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
	purged, err := internal.PurgeLogicalCloud(ctx, &quotav1.PurgeLogicalCloudRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Positive(t, purged.GetRemoved())
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

func TestInstallationContainerDefaults(t *testing.T) {
	t.Parallel()
	def, err := kube.ParseHardText("DCM_DEFAULT_QUOTA", "cpu=8,memory=32Gi,limits.memory=200Mi")
	require.NoError(t, err)
	for _, c := range []struct{ request, limit, want string }{
		{"cpu=100m", "cpu=500m,memory=256Mi", "DCM_CONTAINER_DEFAULT_LIMIT: default memory limit 256Mi is above limits.memory 200Mi of the default quota"},
		{"cpu=1", "cpu=500m", "DCM_CONTAINER_DEFAULT_REQUEST: default cpu request 1 is above the default cpu limit 500m"},
		{"cpu=9", "", "DCM_CONTAINER_DEFAULT_REQUEST: default cpu request 9 is above cpu 8 of the default quota"},
	} {
		d, err := quota.ParseDefaults(c.request, c.limit)
		require.NoError(t, err)
		_, err = quota.New(nil, def, nil, d)
		require.ErrorContains(t, err, c.want)
	}
	for _, c := range []struct{ request, limit, want string }{
		{"cpu=lots", "", "DCM_CONTAINER_DEFAULT_REQUEST.cpu"},
		{"", "nvidia.com/gpu=1", `DCM_CONTAINER_DEFAULT_LIMIT: "nvidia.com/gpu": a container default is cpu or memory only`},
		{"memory=0", "", "DCM_CONTAINER_DEFAULT_REQUEST: memory 0: a container default must be above zero"},
	} {
		_, err := quota.ParseDefaults(c.request, c.limit)
		require.ErrorContains(t, err, c.want)
	}
}

// limitRange is the part of a rendered LimitRange the test reads.
type limitRange struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Limits []struct {
			Type           string            `json:"type"`
			Default        map[string]string `json:"default"`
			DefaultRequest map[string]string `json:"defaultRequest"`
		} `json:"limits"`
	} `json:"spec"`
}

func TestContainerDefaults(t *testing.T) {
	t.Parallel()
	def, err := kube.ParseHardText("DCM_DEFAULT_QUOTA", "cpu=8,memory=32Gi,pods=100")
	require.NoError(t, err)
	containers, err := quota.ParseDefaults("cpu=100m,memory=128Mi", "cpu=500m,memory=256Mi")
	require.NoError(t, err)
	core := factstest.New(t)
	conn := servertest.Serve(t, func(st *store.Store) []server.Service {
		svc, err := quota.New(keep(core, st, "quota"), def, nil, containers)
		require.NoError(t, err)
		return []server.Service{svc}
	})
	c, internal := quotav1.NewQuotaServiceClient(conn), quotav1.NewQuotaInternalServiceClient(conn)
	ctx := context.Background()
	for _, lc := range []string{"lc", "small", "priv"} {
		level := kube.LevelStandard
		if lc == "priv" {
			level = kube.LevelPrivileged
		}
		core.Add("p", lc, level, "ns-"+lc)
	}
	core.Add("p", "adm", kube.LevelAdmin, "")
	render := func(lc, level string) *quotav1.RenderQuotasResponse {
		t.Helper()
		r, err := internal.RenderQuotas(ctx, &quotav1.RenderQuotasRequest{Project: "p", LogicalCloud: lc, Level: level, Namespace: "ns-" + lc})
		require.NoError(t, err)
		return r
	}
	lastLimitRange := func(r *quotav1.RenderQuotasResponse) limitRange {
		t.Helper()
		var out limitRange
		require.NoError(t, json.Unmarshal([]byte(r.GetManifests()[len(r.GetManifests())-1]), &out))
		require.Equal(t, "LimitRange", out.Kind)
		require.Equal(t, quota.LimitRangeName, out.Metadata.Name)
		require.Equal(t, quota.LimitRangeName, r.GetNames()[len(r.GetNames())-1], "names in manifest order")
		require.Len(t, out.Spec.Limits, 1)
		require.Equal(t, "Container", out.Spec.Limits[0].Type)
		return out
	}
	get := func(lc string) *quotav1.ContainerDefaults {
		t.Helper()
		r, err := c.GetContainerDefaults(ctx, &quotav1.GetContainerDefaultsRequest{Project: "p", LogicalCloud: lc})
		require.NoError(t, err)
		return r.GetContainerDefaults()
	}
	put := func(lc, limitJSON, requestJSON string) (*quotav1.UpdateContainerDefaultsResponse, error) {
		lim, req := &structpb.Struct{}, &structpb.Struct{}
		require.NoError(t, protojson.Unmarshal([]byte(limitJSON), lim))
		require.NoError(t, protojson.Unmarshal([]byte(requestJSON), req))
		return c.UpdateContainerDefaults(ctx, &quotav1.UpdateContainerDefaultsRequest{Project: "p", LogicalCloud: lc,
			ContainerDefaults: &quotav1.ContainerDefaults{DefaultLimit: lim, DefaultRequest: req}})
	}
	createQuota := func(lc, name, hardJSON string) error {
		spec := &structpb.Struct{}
		require.NoError(t, protojson.Unmarshal([]byte(hardJSON), spec))
		_, err := c.CreateQuota(ctx, &quotav1.CreateQuotaRequest{Project: "p", LogicalCloud: lc, Quota: &quotav1.Quota{
			Metadata: &typesv1.Metadata{Name: name}, Spec: spec}})
		return err
	}
	invalid := func(err error, field, says string) {
		t.Helper()
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), field+": ")
		require.Contains(t, status.Convert(err).Message(), says)
	}

	// The installation's defaults: in every standard and privileged
	// logical cloud, after its quotas.
	r := render("lc", kube.LevelStandard)
	require.Equal(t, []string{"default", quota.LimitRangeName}, r.GetNames())
	lr := lastLimitRange(r)
	require.Equal(t, map[string]string{"cpu": "500m", "memory": "256Mi"}, lr.Spec.Limits[0].Default)
	require.Equal(t, map[string]string{"cpu": "100m", "memory": "128Mi"}, lr.Spec.Limits[0].DefaultRequest)
	require.Equal(t, "ns-lc", lr.Metadata.Namespace)
	require.Equal(t, kube.Labels("p", "lc"), lr.Metadata.Labels)
	golden(t, "limitrange", r.GetManifests())
	require.Equal(t, lr, lastLimitRange(render("priv", kube.LevelPrivileged)).withNamespace("ns-lc", "lc"))
	got := get("lc")
	require.Equal(t, quota.SourceInstallation, got.GetSource())
	require.Equal(t, "256Mi", got.GetDefaultLimit().GetFields()["memory"].GetStringValue())
	_, err = c.GetContainerDefaults(ctx, &quotav1.GetContainerDefaultsRequest{Project: "p", LogicalCloud: "adm"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "an admin logical cloud has no namespace")

	// The logical cloud's own, laid over the installation's; numbers as
	// quantities too.
	resp, err := put("lc", `{"memory":"1Gi"}`, `{"cpu":0.2}`)
	require.NoError(t, err)
	require.Equal(t, quota.SourceLogicalCloud, resp.GetContainerDefaults().GetSource())
	lr = lastLimitRange(render("lc", kube.LevelStandard))
	require.Equal(t, map[string]string{"cpu": "500m", "memory": "1Gi"}, lr.Spec.Limits[0].Default)
	require.Equal(t, map[string]string{"cpu": "200m", "memory": "128Mi"}, lr.Spec.Limits[0].DefaultRequest)
	stored := get("lc")
	require.Equal(t, quota.SourceLogicalCloud, stored.GetSource())

	// Refused, naming the field, and nothing stored.
	for _, bad := range []struct{ limit, request, field, says string }{
		{`{"cpu":"10"}`, `{"cpu":"9"}`, "container-defaults.default-request.cpu", `9 is above cpu 8 of quota "default"`},
		{`{}`, `{"memory":"2Gi"}`, "container-defaults.default-request.memory", "2Gi is above the default memory limit 256Mi (the installation's, DCM_CONTAINER_DEFAULT_LIMIT"},
		{`{"cpu":"lots"}`, `{}`, "container-defaults.default.cpu", "not a Kubernetes quantity"},
		{`{"nvidia.com/gpu":"1"}`, `{}`, "container-defaults.default.nvidia.com/gpu", "cpu or memory only"},
		{`{}`, `{"memory":0}`, "container-defaults.default-request.memory", "above zero"},
	} {
		_, err := put("lc", bad.limit, bad.request)
		invalid(err, bad.field, bad.says)
		require.True(t, proto.Equal(stored, get("lc")), "nothing stored after %s %s", bad.limit, bad.request)
	}
	// A quota below the logical cloud's own default limit.
	err = createQuota("lc", "tight", `{"limits.memory":"512Mi"}`)
	invalid(err, "quota.spec.limits.memory", `512Mi of quota "tight" is below the default memory limit 1Gi, the logical cloud's container default`)
	list, err := c.ListQuotas(ctx, &quotav1.ListQuotasRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Len(t, list.GetQuotas(), 1)
	require.Equal(t, "default", list.GetQuotas()[0].GetMetadata().GetName(), "nothing stored")

	// A small quota below the installation's defaults: refused, saying so;
	// the logical cloud's own defaults first, then the quota.
	err = createQuota("small", "small", `{"requests.cpu":"50m","limits.memory":"128Mi"}`)
	invalid(err, "quota.spec.requests.cpu", "the installation's default (DCM_CONTAINER_DEFAULT_REQUEST)")
	_, err = put("small", `{"memory":"128Mi"}`, `{"cpu":"50m"}`)
	require.NoError(t, err)
	require.NoError(t, createQuota("small", "small", `{"requests.cpu":"50m","limits.memory":"128Mi"}`))
	_, err = c.DeleteContainerDefaults(ctx, &quotav1.DeleteContainerDefaultsRequest{Project: "p", LogicalCloud: "small"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "the installation's would not fit: %v", err)
	require.Contains(t, status.Convert(err).Message(), "DCM_CONTAINER_DEFAULT_")
	// Back to the installation's once the quota allows it.
	_, err = c.DeleteQuota(ctx, &quotav1.DeleteQuotaRequest{Project: "p", LogicalCloud: "small", Name: "small"})
	require.NoError(t, err)
	_, err = c.DeleteContainerDefaults(ctx, &quotav1.DeleteContainerDefaultsRequest{Project: "p", LogicalCloud: "small"})
	require.NoError(t, err)
	require.Equal(t, quota.SourceInstallation, get("small").GetSource())

	// The last quota of its own may not go while the default quota would
	// leave no room for its defaults.
	_, err = put("priv", `{"memory":"40Gi"}`, `{"memory":"40Gi"}`)
	invalid(err, "container-defaults.default-request.memory", `40Gi is above memory 32Gi of quota "default"`)
	require.NoError(t, createQuota("priv", "big", `{"requests.memory":"64Gi","memory":"64Gi"}`))
	_, err = put("priv", `{"memory":"40Gi"}`, `{"memory":"40Gi"}`)
	require.NoError(t, err)
	_, err = c.DeleteQuota(ctx, &quotav1.DeleteQuotaRequest{Project: "p", LogicalCloud: "priv", Name: "big"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)

	// The purge removes them.
	_, err = internal.PurgeLogicalCloud(ctx, &quotav1.PurgeLogicalCloudRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Equal(t, quota.SourceInstallation, get("lc").GetSource())
}

// withNamespace is l as it is for logical cloud lc in namespace ns.
func (l limitRange) withNamespace(ns, lc string) limitRange {
	l.Metadata.Namespace = ns
	l.Metadata.Labels = kube.Labels("p", lc)
	return l
}

// TestContainerDefaultsAfterInstallationChange: a logical cloud's own
// default request, set when it fitted the installation's default limit,
// is above that limit after the installation lowers it; the render says
// so (FailedPrecondition) instead of a LimitRange every cluster refuses.
func TestContainerDefaultsAfterInstallationChange(t *testing.T) {
	t.Parallel()
	core := factstest.New(t)
	core.Add("p", "lc", kube.LevelStandard, "ns-lc")
	st := storetest.Open(t)
	before, err := quota.ParseDefaults("cpu=100m,memory=128Mi", "cpu=500m,memory=512Mi")
	require.NoError(t, err)
	after, err := quota.ParseDefaults("cpu=100m,memory=128Mi", "cpu=500m,memory=256Mi")
	require.NoError(t, err)
	ctx := context.Background()
	old, err := quota.New(keep(core, st, "quota"), nil, nil, before)
	require.NoError(t, err)
	_, err = old.UpdateContainerDefaults(ctx, &quotav1.UpdateContainerDefaultsRequest{Project: "p", LogicalCloud: "lc",
		ContainerDefaults: &quotav1.ContainerDefaults{DefaultRequest: &structpb.Struct{Fields: map[string]*structpb.Value{"memory": structpb.NewStringValue("300Mi")}}}})
	require.NoError(t, err)
	render := &quotav1.RenderQuotasRequest{Project: "p", LogicalCloud: "lc", Level: kube.LevelStandard, Namespace: "ns-lc"}
	_, err = old.RenderQuotas(ctx, render)
	require.NoError(t, err)
	changed, err := quota.New(keep(core, st, "quota"), nil, nil, after)
	require.NoError(t, err)
	_, err = changed.RenderQuotas(ctx, render)
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)
	require.ErrorContains(t, err, "default memory request 300Mi is above the default memory limit 256Mi")
}
