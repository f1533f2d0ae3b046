package quota_test

import (
	"context"
	"strings"
	"testing"

	"buf.build/go/protovalidate"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/api/resource"
	metavalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	quotav1 "github.com/dcm-project/dcm/gen/dcm/quota/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/facts/factstest"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/quota/internal/quota"
)

// FuzzRenderQuotas stores quotas as a project admin's CreateQuota would
// (each line of the input "name spec", the spec the JSON of the REST
// body's spec: a Kubernetes hard map with quantities as strings or
// numbers), on a service with or without a default and a maximum quota,
// renders them as core asks for the level and namespace the input gives,
// and removes them again. Requests the gRPC validation interceptor refuses
// are not sent, as in the program. The rule: no panic; errors a caller can
// act on; every manifest a ResourceQuota whose metadata, resource names and
// quantities a Kubernetes API server accepts.
func FuzzRenderQuotas(f *testing.F) {
	for _, s := range []struct {
		project, lc, ns, level, quotas string
		defaults                       bool
	}{
		{"p", "lc", "ns-1", kube.LevelStandard, `quota-1 {"cpu":"400","memory":"1000Gi","pods":"500","limits.cpu":"2000m","dummy/dummyResource":100}`, false},
		{"proj1", "lc-1", "ns-1", kube.LevelStandard, `quota-1 {"configmaps":10,"requests.cpu":"2"}`, true},
		{"p", "lc", "ns-1", kube.LevelStandard, "", true},
		{"p", "lc", "ns-1", kube.LevelPrivileged, `a {"cpu":"200","memory":"500Gi"}` + "\n" + `b {}`, true},
		{"p", "adm", "", kube.LevelAdmin, `a {"cpu":"1"}`, true},
		{"p", "lc", "ns", kube.LevelStandard, `bad {"cpu":"-1","x y":true,"pods":1e400}`, false},
		{"p", "lc", "ns", kube.LevelStandard, `big {"cpu":"9223372036854775807Ei","memory":1e300,"pods":0.0000001}`, false},
	} {
		f.Add(s.project, s.lc, s.ns, s.level, s.quotas, s.defaults)
	}
	core := factstest.New(f)
	st := storetest.Open(f)
	def, err := kube.ParseHardText("DCM_DEFAULT_QUOTA", "cpu=8,memory=32Gi,pods=100")
	require.NoError(f, err)
	maximum, err := kube.ParseHardText("DCM_MAX_QUOTA", "cpu=16,pods=200,memory=64Gi")
	require.NoError(f, err)
	plain, err := quota.New(keep(core, st, "quota"), nil, nil, quota.Defaults{})
	require.NoError(f, err)
	containers, err := quota.ParseDefaults("cpu=100m,memory=128Mi", "cpu=500m,memory=256Mi")
	require.NoError(f, err)
	bounded, err := quota.New(keep(core, st, "quota"), def, maximum, containers)
	require.NoError(f, err)
	v, err := protovalidate.New()
	require.NoError(f, err)
	ctx := context.Background()

	f.Fuzz(func(t *testing.T, project, lc, ns, level, quotas string, defaults bool) {
		svc := plain
		if defaults {
			svc = bounded
		}
		core.Add(project, lc, level, ns)
		defer core.Remove(project, lc)
		lines := strings.Split(quotas, "\n")
		for _, line := range lines[:min(3, len(lines))] {
			name, specJSON, _ := strings.Cut(line, " ")
			spec := &structpb.Struct{}
			if specJSON != "" && protojson.Unmarshal([]byte(specJSON), spec) != nil {
				continue // the gateway refuses it before any service
			}
			req := &quotav1.CreateQuotaRequest{Project: project, LogicalCloud: lc,
				Quota: &quotav1.Quota{Metadata: &typesv1.Metadata{Name: name}, Spec: spec}}
			if sendable(v, req) {
				_, err := svc.CreateQuota(ctx, req)
				wantClear(t, "CreateQuota", err)
			}
		}
		defer func() {
			if req := (&quotav1.PurgeLogicalCloudRequest{Project: project, LogicalCloud: lc}); sendable(v, req) {
				_, err := svc.PurgeLogicalCloud(ctx, req)
				require.NoError(t, err)
			}
		}()
		render := &quotav1.RenderQuotasRequest{Project: project, LogicalCloud: lc, Namespace: ns, Level: level}
		if !sendable(v, render) {
			return
		}
		resp, err := svc.RenderQuotas(ctx, render)
		if err != nil {
			wantClear(t, "RenderQuotas", err)
			return
		}
		require.Len(t, resp.GetNames(), len(resp.GetManifests()))
		for i, m := range resp.GetManifests() {
			obj := &unstructured.Unstructured{}
			require.NoError(t, obj.UnmarshalJSON([]byte(m)), "%s", m)
			require.Equal(t, resp.GetNames()[i], obj.GetName())
			if obj.GetKind() == "LimitRange" {
				require.Equal(t, svc == bounded, i == len(resp.GetManifests())-1, "the LimitRange comes last, with container defaults only")
				require.Equal(t, quota.LimitRangeName, obj.GetName())
				continue
			}
			require.Equal(t, "ResourceQuota", obj.GetKind())
			require.Equal(t, resp.GetNamespace(), obj.GetNamespace())
			require.Empty(t, metavalidation.ValidateObjectMetaAccessor(obj, true, metavalidation.NameIsDNSSubdomain, field.NewPath("metadata")),
				"a Kubernetes API server refuses %s", m)
			hard, _, err := unstructured.NestedStringMap(obj.Object, "spec", "hard")
			require.NoError(t, err, "%s", m)
			for res, q := range hard {
				require.Empty(t, validation.IsQualifiedName(res), "resource name %q in %s", res, m)
				parsed, err := resource.ParseQuantity(q)
				require.NoError(t, err, "quantity of %s in %s", res, m)
				require.GreaterOrEqual(t, parsed.Sign(), 0, "quantity of %s in %s", res, m)
			}
		}
	})
}

// wantClear fails unless err is nil or a status a caller can act on.
func wantClear(t *testing.T, call string, err error) {
	t.Helper()
	switch status.Code(err) {
	case codes.OK, codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.AlreadyExists, codes.PermissionDenied:
	default:
		t.Fatalf("%s: %v (%s)", call, err, status.Code(err))
	}
}

// sendable says whether req reaches the service in the program: it goes
// over the wire (proto strings are UTF-8) and the validation interceptor
// lets it through.
func sendable(v protovalidate.Validator, req proto.Message) bool {
	_, err := proto.Marshal(req)
	return err == nil && v.Validate(req) == nil
}
