package namespace_test

import (
	"cmp"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/facts/factstest"
	"github.com/dcm-project/dcm/platform/goldentest"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/namespace/internal/namespace"
)

// golden compares manifests, one a line, with testdata/name.golden.
func golden(t *testing.T, name string, manifests []string) {
	t.Helper()
	goldentest.Manifests(t, name, manifests)
}

// TestRenderNamespace renders from what core sends in the request: core is
// forbidden once the records exist, so a render that called it back would
// fail the test.
func TestRenderNamespace(t *testing.T) {
	t.Parallel()
	core := factstest.New(t)
	c := namespacev1.NewNamespaceInternalServiceClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		svc, err := namespace.New(keep(core, st, "namespace"), "", "")
		require.NoError(t, err)
		return []server.Service{svc}
	}))
	ctx := context.Background()
	specs := map[string]*corev1.LogicalCloudSpec{
		"lc":     {Level: kube.LevelStandard, Namespace: "ns-1"},
		"adm":    {Level: kube.LevelAdmin},
		"strict": {Level: kube.LevelStandard, Namespace: "ns-2", PodSecurity: kube.PodSecurityRestricted},
		"mesh":   {Level: kube.LevelStandard, Namespace: "ns-3", ServiceMesh: &corev1.ServiceMesh{Enabled: true}},
	}
	for lc, spec := range specs {
		core.AddSpec("p", lc, spec)
	}
	for lc, ns := range map[string]string{"lc": "ns-1", "strict": "ns-2", "mesh": "ns-3"} {
		_, err := c.CreateNamespace(ctx, &namespacev1.CreateNamespaceRequest{Project: "p", LogicalCloud: lc, Namespace: &namespacev1.Namespace{Name: ns}})
		require.NoError(t, err)
	}
	render := func(lc string) (*namespacev1.RenderNamespaceResponse, error) {
		spec := specs[lc]
		req := &namespacev1.RenderNamespaceRequest{Project: "p", LogicalCloud: lc,
			Namespace: spec.GetNamespace(), Level: spec.GetLevel(), PodSecurity: spec.GetPodSecurity()}
		if spec.GetServiceMesh().GetEnabled() {
			// The service mesh service's answers, as core passes them.
			req.IstioRevision, req.IstioNamespace = lc, lc+"-istio-system"
		}
		return c.RenderNamespace(ctx, req)
	}

	r, err := render("lc")
	require.NoError(t, err)
	require.Len(t, r.GetManifests(), 3, "the Namespace and its two NetworkPolicies")
	require.JSONEq(t, `{"apiVersion": "v1", "kind": "Namespace",
 "metadata": {"name": "ns-1", "labels": {"dcm.io/project": "p", "dcm.io/logical-cloud": "lc",
  "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "baseline",
  "pod-security.kubernetes.io/audit": "baseline"}}}`, r.GetManifests()[0])
	again, err := render("lc")
	require.NoError(t, err)
	require.Equal(t, r.GetManifests(), again.GetManifests(), "byte-identical")
	strict, err := render("strict")
	require.NoError(t, err)
	require.Contains(t, strict.GetManifests()[0], `"pod-security.kubernetes.io/enforce":"restricted"`, "the logical cloud's own level wins")
	require.NotContains(t, r.GetManifests()[0]+strict.GetManifests()[0], namespace.IstioRevisionLabel, "no revision, no label")
	mesh, err := render("mesh")
	require.NoError(t, err)
	require.Contains(t, mesh.GetManifests()[0], `"istio.io/rev":"mesh"`, "the revision selects the logical cloud's sidecar injector")
	golden(t, "render", append(append(r.GetManifests(), strict.GetManifests()...), mesh.GetManifests()...))
	_, err = c.RenderNamespace(ctx, &namespacev1.RenderNamespaceRequest{Project: "p", LogicalCloud: "mesh",
		Namespace: "ns-3", Level: kube.LevelStandard, IstioRevision: "bad revision"})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), "istio-revision")

	labelled, err := c.RenderNamespace(ctx, &namespacev1.RenderNamespaceRequest{Project: "p", LogicalCloud: "lc", Namespace: "ns-1",
		Level: kube.LevelStandard, Labels: []*typesv1.Label{{Key: "geo", Value: "eu"}, {Key: "example.com/team", Value: "a"}}})
	require.NoError(t, err)
	require.JSONEq(t, `{"apiVersion": "v1", "kind": "Namespace",
 "metadata": {"name": "ns-1", "labels": {"dcm.io/project": "p", "dcm.io/logical-cloud": "lc", "geo": "eu", "example.com/team": "a",
  "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "baseline",
  "pod-security.kubernetes.io/audit": "baseline"}}}`, labelled.GetManifests()[0], "the logical cloud's own labels beside the derived ones")
	_, err = c.RenderNamespace(ctx, &namespacev1.RenderNamespaceRequest{Project: "p", LogicalCloud: "lc", Namespace: "ns-1",
		Level: kube.LevelStandard, Labels: []*typesv1.Label{{Key: "pod-security.kubernetes.io/enforce", Value: "privileged"}}})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "a system label is refused here too, whoever asks")

	_, err = render("adm")
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), "admin logical cloud has no namespace")
	_, err = render("missing")
	require.Equal(t, codes.NotFound, status.Code(err))
}

// TestDeleteNamespaces: DELETE .../namespaces leaves core's spec.namespace
// (the one source of the name) alone; the namespace is no longer listed
// and the logical cloud cannot be applied.
func TestDeleteNamespaces(t *testing.T) {
	t.Parallel()
	core := factstest.New(t)
	conn := servertest.Serve(t, func(st *store.Store) []server.Service {
		svc, err := namespace.New(keep(core, st, "namespace"), "", "")
		require.NoError(t, err)
		return []server.Service{svc}
	})
	internal, public := namespacev1.NewNamespaceInternalServiceClient(conn), namespacev1.NewNamespaceServiceClient(conn)
	ctx := context.Background()
	core.Add("p", "lc", kube.LevelStandard, "ns-1")
	_, err := internal.CreateNamespace(ctx, &namespacev1.CreateNamespaceRequest{Project: "p", LogicalCloud: "lc", Namespace: &namespacev1.Namespace{Name: "ns-1"}})
	require.NoError(t, err)
	list, err := public.ListNamespaces(ctx, &namespacev1.ListNamespacesRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Len(t, list.GetNamespaces(), 1)
	require.Equal(t, "ns-1", list.GetNamespaces()[0].GetName())

	_, err = public.DeleteNamespaces(ctx, &namespacev1.DeleteNamespacesRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	_, err = public.DeleteNamespaces(ctx, &namespacev1.DeleteNamespacesRequest{Project: "p", LogicalCloud: "lc"})
	require.Equal(t, codes.NotFound, status.Code(err), "already removed")
	list, err = public.ListNamespaces(ctx, &namespacev1.ListNamespacesRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	require.Empty(t, list.GetNamespaces())
	_, err = internal.RenderNamespace(ctx, &namespacev1.RenderNamespaceRequest{Project: "p", LogicalCloud: "lc", Namespace: "ns-1", Level: kube.LevelStandard})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), `logical cloud "lc" has no namespace`)

	// The purge removes the record, mark and all, without calling core.
	_, err = internal.PurgeLogicalCloud(ctx, &namespacev1.PurgeLogicalCloudRequest{Project: "p", LogicalCloud: "lc"})
	require.NoError(t, err)
	_, err = internal.RenderNamespace(ctx, &namespacev1.RenderNamespaceRequest{Project: "p", LogicalCloud: "lc", Namespace: "ns-1", Level: kube.LevelStandard})
	require.Equal(t, codes.NotFound, status.Code(err))
}

// TestRenderNetworkPolicies: a logical cloud's namespace gets dcm-ingress
// (its own namespace, its Istio namespace, the namespaces it opens to) and
// dcm-egress (its own and Istio namespace, cluster DNS, DCM's logical
// clouds, DCM_TENANT_EGRESS_CIDRS), labelled with the logical cloud.
func TestRenderNetworkPolicies(t *testing.T) {
	t.Parallel()
	core := factstest.New(t)
	c := namespacev1.NewNamespaceInternalServiceClient(servertest.Serve(t, func(st *store.Store) []server.Service {
		svc, err := namespace.New(keep(core, st, "namespace"), "", " 10.20.0.0/16, 2001:db8::/48 ")
		require.NoError(t, err)
		return []server.Service{svc}
	}))
	ctx := context.Background()
	core.Add("p", "lc", kube.LevelStandard, "ns-1")
	_, err := c.CreateNamespace(ctx, &namespacev1.CreateNamespaceRequest{Project: "p", LogicalCloud: "lc", Namespace: &namespacev1.Namespace{Name: "ns-1"}})
	require.NoError(t, err)
	render := func(req *namespacev1.RenderNamespaceRequest) []policy {
		t.Helper()
		req.Project, req.LogicalCloud, req.Namespace, req.Level = "p", "lc", "ns-1", kube.LevelStandard
		r, err := c.RenderNamespace(ctx, req)
		require.NoError(t, err)
		require.Len(t, r.GetManifests(), 3)
		golden(t, "netpol-"+cmp.Or(req.GetIstioNamespace(), "plain"), r.GetManifests()[1:])
		var out []policy
		for _, m := range r.GetManifests()[1:] {
			var p policy
			require.NoError(t, json.Unmarshal([]byte(m), &p))
			require.Equal(t, "NetworkPolicy", p.Kind)
			require.Equal(t, "ns-1", p.Metadata.Namespace)
			require.Equal(t, kube.Labels("p", "lc"), p.Metadata.Labels)
			require.Empty(t, p.Spec.PodSelector, "every pod of the namespace")
			out = append(out, p)
		}
		return out
	}

	plain := render(&namespacev1.RenderNamespaceRequest{})
	in, eg := plain[0], plain[1]
	require.Equal(t, namespace.NetpolIngress, in.Metadata.Name)
	require.Equal(t, []string{"Ingress"}, in.Spec.PolicyTypes)
	require.Equal(t, [][]string{{"ns-1"}}, in.fromNamespaces(), "only its own namespace gets in")
	require.Equal(t, namespace.NetpolEgress, eg.Metadata.Name)
	require.Equal(t, []string{"Egress"}, eg.Spec.PolicyTypes)
	require.Equal(t, []string{"10.20.0.0/16", "2001:db8::/48"}, eg.cidrs())
	require.Contains(t, eg.Raw, `{"ports":[{"port":53,"protocol":"UDP"},{"port":53,"protocol":"TCP"}],"to":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"kube-system"}},"podSelector":{"matchLabels":{"k8s-app":"kube-dns"}}}]}`, "cluster DNS")
	require.Contains(t, eg.Raw, `{"namespaceSelector":{"matchExpressions":[{"key":"dcm.io/logical-cloud","operator":"Exists"}]}}`)

	opened := render(&namespacev1.RenderNamespaceRequest{IstioNamespace: "lc-istio-system", IngressFrom: []string{"sibling", "other"}})
	require.Equal(t, [][]string{{"ns-1", "lc-istio-system", "sibling", "other"}}, opened[0].fromNamespaces())
	require.Contains(t, opened[1].Raw, `{"to":[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"ns-1"}}},{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"lc-istio-system"}}}]}`,
		"egress to its own and its mesh namespace")

	for field, req := range map[string]*namespacev1.RenderNamespaceRequest{
		"ingress-from[1]": {Project: "p", LogicalCloud: "lc", Namespace: "ns-1", Level: kube.LevelStandard, IngressFrom: []string{"ok", "Not_A_Namespace"}},
		"istio-namespace": {Project: "p", LogicalCloud: "lc", Namespace: "ns-1", Level: kube.LevelStandard, IstioNamespace: "a.b"},
	} {
		_, err := c.RenderNamespace(ctx, req)
		require.Equal(t, codes.InvalidArgument, status.Code(err), field)
		require.Contains(t, status.Convert(err).Message(), field)
	}
}

// policy is what the tests read of a rendered NetworkPolicy.
type policy struct {
	Kind     string
	Metadata struct {
		Name, Namespace string
		Labels          map[string]string
	}
	Spec struct {
		PodSelector map[string]any `json:"podSelector"`
		PolicyTypes []string       `json:"policyTypes"`
		Ingress     []struct {
			From []peer
		}
		Egress []struct {
			To []peer
		}
	}
	Raw string
}

type peer struct {
	NamespaceSelector *struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"namespaceSelector"`
	IPBlock *struct{ CIDR string } `json:"ipBlock"`
}

func (p *policy) UnmarshalJSON(b []byte) error {
	type plain policy
	if err := json.Unmarshal(b, (*plain)(p)); err != nil {
		return err
	}
	p.Raw = string(b)
	return nil
}

// fromNamespaces are the namespaces each ingress rule admits by name.
func (p policy) fromNamespaces() [][]string {
	var out [][]string
	for _, r := range p.Spec.Ingress {
		var names []string
		for _, f := range r.From {
			if f.NamespaceSelector != nil {
				names = append(names, f.NamespaceSelector.MatchLabels[kube.NamespaceNameLabel])
			}
		}
		out = append(out, names)
	}
	return out
}

// cidrs are the ipBlocks the egress rules allow.
func (p policy) cidrs() []string {
	var out []string
	for _, r := range p.Spec.Egress {
		for _, to := range r.To {
			if to.IPBlock != nil {
				out = append(out, to.IPBlock.CIDR)
			}
		}
	}
	return out
}

func TestEgressCIDRsSetting(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"10.0.0.0", "10.0.0.0/33", "example.com/8", "10.1.2.3/8"} {
		_, err := namespace.New(nil, "", "192.168.0.0/16,"+bad)
		require.ErrorContains(t, err, "DCM_TENANT_EGRESS_CIDRS", bad)
		require.ErrorContains(t, err, bad)
	}
}

func TestPodSecurityDefault(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"privileged", "none", "Baseline"} {
		_, err := namespace.New(nil, bad, "")
		require.ErrorContains(t, err, "DCM_POD_SECURITY", bad)
	}
}
