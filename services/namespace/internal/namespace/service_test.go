package namespace_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	"github.com/dcm-project/dcm/platform/coretest"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/namespace/internal/namespace"
)

func TestRenderNamespace(t *testing.T) {
	t.Parallel()
	core := coretest.New()
	c := namespacev1.NewNamespaceServiceClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		svc, err := namespace.New(st, core, "")
		require.NoError(t, err)
		return []server.Service{svc}
	}))
	ctx := context.Background()
	core.Add("p", "lc", kube.LevelStandard, "ns-1")
	core.Add("p", "adm", kube.LevelAdmin, "")
	core.AddSpec("p", "strict", &corev1.LogicalCloudSpec{Level: kube.LevelStandard, Namespace: "ns-2", PodSecurity: kube.PodSecurityRestricted})
	for lc, ns := range map[string]string{"lc": "ns-1", "strict": "ns-2"} {
		_, err := c.CreateNamespace(ctx, &namespacev1.CreateNamespaceRequest{Project: "p", LogicalCloud: lc, Namespace: &namespacev1.Namespace{Name: ns}})
		require.NoError(t, err)
	}
	render := func(lc string) (*namespacev1.RenderNamespaceResponse, error) {
		return c.RenderNamespace(ctx, &namespacev1.RenderNamespaceRequest{Project: "p", LogicalCloud: lc})
	}

	r, err := render("lc")
	require.NoError(t, err)
	require.Len(t, r.GetManifests(), 1)
	require.JSONEq(t, `{"apiVersion": "v1", "kind": "Namespace",
 "metadata": {"name": "ns-1", "labels": {"dcm.io/project": "p", "dcm.io/logical-cloud": "lc",
  "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "baseline",
  "pod-security.kubernetes.io/audit": "baseline"}}}`, r.GetManifests()[0])
	again, err := render("lc")
	require.NoError(t, err)
	require.Equal(t, r.GetManifests(), again.GetManifests(), "byte-identical")
	r, err = render("strict")
	require.NoError(t, err)
	require.Contains(t, r.GetManifests()[0], `"pod-security.kubernetes.io/enforce":"restricted"`, "the logical cloud's own level wins")

	_, err = render("adm")
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), "admin logical cloud has no namespace")
	_, err = render("missing")
	require.Equal(t, codes.NotFound, status.Code(err))

	_, err = c.DeleteNamespaces(ctx, &namespacev1.DeleteNamespacesRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	_, err = render("lc")
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), `logical cloud "lc" has no namespace`)
}

func TestPodSecurityDefault(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"privileged", "none", "Baseline"} {
		_, err := namespace.New(nil, coretest.New(), bad)
		require.ErrorContains(t, err, "DCM_POD_SECURITY", bad)
	}
}
