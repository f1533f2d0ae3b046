package namespace_test

import (
	"context"
	"testing"

	"buf.build/go/protovalidate"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	"github.com/dcm-project/dcm/platform/facts/factstest"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/namespace/internal/namespace"
)

// FuzzRenderNamespace stores a namespace record as core's CreateNamespace
// would, renders it with what core sends (namespace, level, pod security
// level), and removes it again. Requests the gRPC validation interceptor
// refuses are not sent, as in the program. The rule: no panic; an error is
// one a caller can act on (InvalidArgument, NotFound, FailedPrecondition);
// a manifest is a Namespace whose metadata a Kubernetes API server accepts,
// with Pod Security levels it knows.
func FuzzRenderNamespace(f *testing.F) {
	for _, s := range []struct{ project, lc, ns, level, podSecurity string }{
		{"p", "lc", "ns-1", kube.LevelStandard, ""},
		{"proj1", "lc-1", "ns-1", kube.LevelStandard, kube.PodSecurityRestricted},
		{"p", "strict", "ns-2", kube.LevelPrivileged, kube.PodSecurityBaseline},
		{"p", "adm", "", kube.LevelAdmin, ""},
		{"p", "lc", "Bad_Name", kube.LevelStandard, "none"},
		{"p", "lc", "ns", "1", kube.PodSecurityPrivileged},
	} {
		f.Add(s.project, s.lc, s.ns, s.level, s.podSecurity)
	}
	core := factstest.New(f)
	svc, err := namespace.New(keep(core, storetest.Open(f), "namespace"), "", "")
	require.NoError(f, err)
	v, err := protovalidate.New()
	require.NoError(f, err)
	ctx := context.Background()

	f.Fuzz(func(t *testing.T, project, lc, ns, level, podSecurity string) {
		core.AddSpec(project, lc, &corev1.LogicalCloudSpec{Level: level, Namespace: ns, PodSecurity: podSecurity})
		defer core.Remove(project, lc)
		create := &namespacev1.CreateNamespaceRequest{Project: project, LogicalCloud: lc, Namespace: &namespacev1.Namespace{Name: ns}}
		if sendable(v, create) {
			_, err := svc.CreateNamespace(ctx, create)
			wantClear(t, "CreateNamespace", err)
			defer func() {
				_, err := svc.PurgeLogicalCloud(ctx, &namespacev1.PurgeLogicalCloudRequest{Project: project, LogicalCloud: lc})
				require.NoError(t, err)
			}()
		}
		render := &namespacev1.RenderNamespaceRequest{Project: project, LogicalCloud: lc, Namespace: ns, Level: level, PodSecurity: podSecurity}
		if !sendable(v, render) {
			return
		}
		resp, err := svc.RenderNamespace(ctx, render)
		if err != nil {
			wantClear(t, "RenderNamespace", err)
			return
		}
		require.Len(t, resp.GetManifests(), 3, "the Namespace and its NetworkPolicies")
		for _, m := range resp.GetManifests()[1:] {
			np := &unstructured.Unstructured{}
			require.NoError(t, np.UnmarshalJSON([]byte(m)), "%s", m)
			require.Equal(t, "NetworkPolicy", np.GetKind())
			require.Equal(t, ns, np.GetNamespace(), "in the logical cloud's namespace")
		}
		obj := &unstructured.Unstructured{}
		require.NoError(t, obj.UnmarshalJSON([]byte(resp.GetManifests()[0])), "%s", resp.GetManifests()[0])
		require.Equal(t, "Namespace", obj.GetKind())
		require.Empty(t, apivalidation.ValidateObjectMetaAccessor(obj, false, apivalidation.ValidateNamespaceName, field.NewPath("metadata")),
			"a Kubernetes API server refuses %s", resp.GetManifests()[0])
		for _, mode := range []string{"enforce", "warn", "audit"} {
			require.Contains(t, []string{kube.PodSecurityPrivileged, kube.PodSecurityBaseline, kube.PodSecurityRestricted},
				obj.GetLabels()[kube.PodSecurityLabelPrefix+mode], "Pod Security admission refuses %s", resp.GetManifests()[0])
		}
	})
}

// wantClear fails unless err is nil or a status a caller can act on.
func wantClear(t *testing.T, call string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.AlreadyExists:
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
