package servicemesh_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/servicemesh/internal/render"
	"github.com/dcm-project/dcm/services/servicemesh/internal/servicemesh"
)

type clients struct {
	pub servicemeshv1.ServiceMeshServiceClient
	in  servicemeshv1.ServiceMeshInternalServiceClient
	st  *store.Store
}

func serve(t *testing.T, cadist *fakeCadist) clients {
	t.Helper()
	var st *store.Store
	conn := servertest.Serve(t, func(s *store.Store) []server.Service {
		st = s
		svc := servicemesh.New(s, cadist, servicemesh.DefaultOptions)
		return []server.Service{svc, svc.Internal()}
	})
	return clients{servicemeshv1.NewServiceMeshServiceClient(conn), servicemeshv1.NewServiceMeshInternalServiceClient(conn), st}
}

// requireNoKeyAtRest reads every stored record of the service as the
// database holds it: no key in clear (sealed secrets are ciphertext).
func requireNoKeyAtRest(t *testing.T, st *store.Store, keys ...string) {
	t.Helper()
	ctx := context.Background()
	for _, coll := range []string{"control_planes", "service_meshes"} {
		cur, err := st.Database().Collection(coll).Find(ctx, bson.D{})
		require.NoError(t, err)
		var docs []bson.Raw
		require.NoError(t, cur.All(ctx, &docs))
		for _, d := range docs {
			text := d.String()
			require.NotContains(t, text, "PRIVATE KEY", coll)
			for _, k := range keys {
				require.NotContains(t, text, base64.StdEncoding.EncodeToString([]byte(k)), coll)
				require.NotContains(t, text, strings.TrimSpace(k), coll)
			}
		}
	}
}

func meshRequest(lc string) *servicemeshv1.RenderControlPlanesRequest {
	return &servicemeshv1.RenderControlPlanesRequest{
		Project: "p1", LogicalCloud: lc, Namespace: lc + "-ns", Level: "standard", Enabled: true,
		Clusters: []*servicemeshv1.MeshTarget{
			{Provider: "edge", Cluster: "c1", LoadbalancerIp: "192.0.2.10"},
			{Provider: "edge", Cluster: "c2", LoadbalancerIp: "192.0.2.20"},
		},
	}
}

// secretData is the data of the cacerts Secret manifest.
func secretData(t *testing.T, j string) map[string]string {
	t.Helper()
	var o struct {
		Data map[string]string `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(j), &o))
	return o.Data
}

func TestRenderMeshWithCadistIntermediates(t *testing.T) {
	t.Parallel()
	ca := newFakeCadist(t)
	c := serve(t, ca)
	ctx := context.Background()
	req := meshRequest("lc1")
	req.CaRoot = "r1"
	resp, err := c.in.RenderControlPlanes(ctx, req)
	require.NoError(t, err)
	require.True(t, resp.GetEnabled())
	require.Equal(t, render.Revision("p1", "lc1"), resp.GetRevision())
	require.Regexp(t, `^lc1-[0-9a-f]{8}$`, resp.GetRevision(), "the name and a hash of project and logical cloud")
	require.Equal(t, "lc1-istio-system", resp.GetIstioNamespace())
	require.Len(t, resp.GetCrds(), 16, "Istio's 15 and external-dns's DNSEndpoint")
	require.True(t, slices.ContainsFunc(resp.GetCrds(), func(c string) bool {
		return strings.Contains(c, `"name":"dnsendpoints.externaldns.k8s.io"`)
	}), "the DNSEndpoint CRD goes with Istio's")
	require.Len(t, ca.issues, 1)
	require.Equal(t, "lc1.p1.dcm.local", ca.issues[0].GetTrustDomain())
	require.Equal(t, "r1", ca.issues[0].GetRoot())
	require.Len(t, ca.issues[0].GetClusters(), 2)

	require.Len(t, resp.GetClusters(), 2)
	for _, cm := range resp.GetClusters() {
		inter := ca.issued["lc1/edge/"+cm.GetCluster()]
		keyB64 := base64.StdEncoding.EncodeToString([]byte(inter.keyPEM))
		sensitive := 0
		for _, m := range cm.GetManifests() {
			if m.GetSensitive() {
				sensitive++
				d := secretData(t, m.GetJson())
				require.Equal(t, keyB64, d["ca-key.pem"])
				require.Equal(t, base64.StdEncoding.EncodeToString([]byte(inter.certPEM)), d["ca-cert.pem"])
				require.Equal(t, base64.StdEncoding.EncodeToString([]byte(ca.root.certPEM)), d["root-cert.pem"])
				require.NotEmpty(t, d["cert-chain.pem"])
				continue
			}
			require.NotContains(t, m.GetJson(), keyB64)
			require.NotContains(t, m.GetJson(), "PRIVATE KEY")
		}
		require.Equal(t, 1, sensitive)
	}

	// The document: public parts per cluster, no key anywhere.
	doc, err := c.pub.GetServiceMesh(ctx, &servicemeshv1.GetServiceMeshRequest{Project: "p1", LogicalCloud: "lc1"})
	require.NoError(t, err)
	sm := doc.GetServiceMesh()
	require.Equal(t, render.Revision("p1", "lc1"), sm.GetRevision())
	require.Equal(t, "lc1-istio-system", sm.GetIstioNamespace())
	require.Equal(t, "lc1.p1.dcm.local", sm.GetTrustDomain())
	require.Len(t, sm.GetDigest(), 64)
	require.False(t, sm.GetReleased())
	for i, cl := range sm.GetClusters() {
		inter := ca.issued["lc1/edge/"+cl.GetCluster()]
		require.Equal(t, []string{"192.0.2.10", "192.0.2.20"}[i], cl.GetEastWestAddress())
		require.Equal(t, "edge-"+cl.GetCluster(), cl.GetNetwork())
		require.Equal(t, inter.cert.SerialNumber.Text(16), cl.GetBundleSerial())
		require.Equal(t, inter.certPEM, cl.GetCaCert())
		require.Empty(t, cl.GetManifests(), "manifests only when asked for")
	}
	full, err := c.pub.GetServiceMesh(ctx, &servicemeshv1.GetServiceMeshRequest{Project: "p1", LogicalCloud: "lc1", Manifests: true})
	require.NoError(t, err)
	text := protojson.Format(full)
	require.NotContains(t, text, "ca-key.pem")
	require.NotContains(t, text, "PRIVATE KEY")
	for _, inter := range ca.issued {
		require.NotContains(t, text, base64.StdEncoding.EncodeToString([]byte(inter.keyPEM)))
	}
	require.Len(t, full.GetServiceMesh().GetClusters()[0].GetManifests(), len(resp.GetClusters()[0].GetManifests()))
	require.Contains(t, text, "cacerts")
	var keys []string
	for _, inter := range ca.issued {
		keys = append(keys, inter.keyPEM)
	}
	requireNoKeyAtRest(t, c.st, keys...)

	// Rendering again keeps the intermediates (cadist is idempotent) and
	// gives the same bytes.
	again, err := c.in.RenderControlPlanes(ctx, req)
	require.NoError(t, err)
	require.Equal(t, protojson.Format(resp), protojson.Format(again))

	// Terminate: revoked once, marked released; rerunning is harmless.
	for range 2 {
		_, err = c.in.ReleaseControlPlanes(ctx, &servicemeshv1.ReleaseControlPlanesRequest{Project: "p1", LogicalCloud: "lc1"})
		require.NoError(t, err)
	}
	require.Len(t, ca.revokes, 1)
	require.Equal(t, "lc1", ca.revokes[0].GetLogicalCloud())
	doc, err = c.pub.GetServiceMesh(ctx, &servicemeshv1.GetServiceMeshRequest{Project: "p1", LogicalCloud: "lc1"})
	require.NoError(t, err)
	require.True(t, doc.GetServiceMesh().GetReleased())

	// Delete: the document and record go; rerunning is harmless.
	for range 2 {
		_, err = c.in.PurgeLogicalCloud(ctx, &servicemeshv1.PurgeLogicalCloudRequest{Project: "p1", LogicalCloud: "lc1"})
		require.NoError(t, err)
	}
	_, err = c.pub.GetServiceMesh(ctx, &servicemeshv1.GetServiceMeshRequest{Project: "p1", LogicalCloud: "lc1"})
	require.Equal(t, codes.NotFound, errs.Code(err))
}

// The control plane record turns the mesh on, with its namespace; two
// logical clouds get different revisions, namespaces and intermediates.
func TestControlPlaneRecordEnablesMesh(t *testing.T) {
	t.Parallel()
	ca := newFakeCadist(t)
	c := serve(t, ca)
	ctx := context.Background()
	_, err := c.pub.CreateControlPlane(ctx, &servicemeshv1.CreateControlPlaneRequest{Project: "p1",
		ControlPlane: &servicemeshv1.ControlPlane{Name: "lc2", Namespace: "mesh-two"}})
	require.NoError(t, err)
	req := meshRequest("lc2")
	req.Enabled = false
	two, err := c.in.RenderControlPlanes(ctx, req)
	require.NoError(t, err)
	require.True(t, two.GetEnabled())
	require.Equal(t, "mesh-two", two.GetIstioNamespace())
	one, err := c.in.RenderControlPlanes(ctx, meshRequest("lc1"))
	require.NoError(t, err)
	require.NotEqual(t, one.GetRevision(), two.GetRevision())
	require.NotEqual(t, one.GetIstioNamespace(), two.GetIstioNamespace())
	require.NotEqual(t, ca.issued["lc1/edge/c1"].certPEM, ca.issued["lc2/edge/c1"].certPEM)
	// spec.service-mesh.namespace wins over the record's.
	req.IstioNamespace = "from-spec"
	spec, err := c.in.RenderControlPlanes(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "from-spec", spec.GetIstioNamespace())
	require.Contains(t, spec.GetClusters()[0].GetManifests()[0].GetJson(), `"name":"from-spec"`)
}

func TestCustomCA(t *testing.T) {
	t.Parallel()
	ca := newFakeCadist(t)
	c := serve(t, ca)
	ctx := context.Background()
	root := newCA(t, "own root", nil, "")
	inter := newCA(t, "own intermediate", root, "")
	resp, err := c.pub.CreateControlPlane(ctx, &servicemeshv1.CreateControlPlaneRequest{Project: "p1", ControlPlane: &servicemeshv1.ControlPlane{
		Name: "lc1", CaCert: inter.certPEM, CaKey: inter.keyPEM, RootCert: root.certPEM, CertChain: inter.certPEM + root.certPEM,
	}})
	require.NoError(t, err)
	require.True(t, resp.GetControlPlane().GetCustomCa())
	require.Empty(t, resp.GetControlPlane().GetCaKey())
	got, err := c.pub.GetControlPlane(ctx, &servicemeshv1.GetControlPlaneRequest{Project: "p1", Name: "lc1"})
	require.NoError(t, err)
	require.Empty(t, got.GetControlPlane().GetCaKey())
	require.Equal(t, "lc1-istio-system", got.GetControlPlane().GetNamespace())

	req := meshRequest("lc1")
	req.Enabled = false
	r, err := c.in.RenderControlPlanes(ctx, req)
	require.NoError(t, err)
	require.Empty(t, ca.issues, "the record's own CA: cadist is not asked")
	for _, cm := range r.GetClusters() {
		for _, m := range cm.GetManifests() {
			if m.GetSensitive() {
				require.Equal(t, base64.StdEncoding.EncodeToString([]byte(inter.keyPEM)), secretData(t, m.GetJson())["ca-key.pem"])
			}
		}
	}
	doc, err := c.pub.GetServiceMesh(ctx, &servicemeshv1.GetServiceMeshRequest{Project: "p1", LogicalCloud: "lc1", Manifests: true})
	require.NoError(t, err)
	require.True(t, doc.GetServiceMesh().GetCustomCa())
	require.NotContains(t, protojson.Format(doc), "PRIVATE KEY")
	require.NotContains(t, protojson.Format(doc), base64.StdEncoding.EncodeToString([]byte(inter.keyPEM)))
	requireNoKeyAtRest(t, c.st, inter.keyPEM)
	_, err = c.in.ReleaseControlPlanes(ctx, &servicemeshv1.ReleaseControlPlanesRequest{Project: "p1", LogicalCloud: "lc1"})
	require.NoError(t, err)
	require.Empty(t, ca.revokes, "nothing of cadist's to revoke")
}

func TestBadControlPlaneBodies(t *testing.T) {
	t.Parallel()
	c := serve(t, newFakeCadist(t))
	ctx := context.Background()
	root := newCA(t, "root", nil, "")
	inter := newCA(t, "intermediate", root, "")
	other := newCA(t, "other root", nil, "")
	leafKey := newCA(t, "x", nil, "")
	leaf := leafCert(t, root)
	good := func() *servicemeshv1.ControlPlane {
		return &servicemeshv1.ControlPlane{Name: "lc1", CaCert: inter.certPEM, CaKey: inter.keyPEM, RootCert: root.certPEM, CertChain: inter.certPEM + root.certPEM}
	}
	cases := []struct {
		name  string
		edit  func(cp *servicemeshv1.ControlPlane)
		field string
	}{
		{"key missing", func(cp *servicemeshv1.ControlPlane) { cp.CaKey = "" }, "control_plane.ca-key"},
		{"only a cert", func(cp *servicemeshv1.ControlPlane) { cp.CaKey, cp.RootCert, cp.CertChain = "", "", "" }, "control_plane.ca-key"},
		{"cert not PEM", func(cp *servicemeshv1.ControlPlane) { cp.CaCert = "not pem" }, "control_plane.ca-cert"},
		{"cert is a key", func(cp *servicemeshv1.ControlPlane) { cp.CaCert = inter.keyPEM }, "control_plane.ca-cert"},
		{"cert not a CA", func(cp *servicemeshv1.ControlPlane) { cp.CaCert = leaf }, "control_plane.ca-cert"},
		{"key of another", func(cp *servicemeshv1.ControlPlane) { cp.CaKey = leafKey.keyPEM }, "control_plane.ca-key"},
		{"key not PEM", func(cp *servicemeshv1.ControlPlane) { cp.CaKey = "secret" }, "control_plane.ca-key"},
		{"root not PEM", func(cp *servicemeshv1.ControlPlane) {
			cp.RootCert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
		}, "control_plane.root-cert"},
		{"chain to another root", func(cp *servicemeshv1.ControlPlane) { cp.RootCert = other.certPEM }, "control_plane.cert-chain"},
		{"namespace not a label", func(cp *servicemeshv1.ControlPlane) { cp.Namespace = "Not_A_Label" }, "control_plane.namespace"},
		{"name too long for the default namespace", func(cp *servicemeshv1.ControlPlane) { cp.Name = strings.Repeat("a", 55) }, "control_plane.namespace"},
		{"name too long for a revision", func(cp *servicemeshv1.ControlPlane) { cp.Name, cp.Namespace = strings.Repeat("a", 57), "ns" }, "control_plane.name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cp := good()
			tc.edit(cp)
			_, err := c.pub.CreateControlPlane(ctx, &servicemeshv1.CreateControlPlaneRequest{Project: "p1", ControlPlane: cp})
			require.Equal(t, codes.InvalidArgument, errs.Code(err), "%v", err)
			require.Equal(t, tc.field, errs.FieldOf(errs.ToStatus(err)), "%v", err)
		})
	}
	_, err := c.pub.GetControlPlane(ctx, &servicemeshv1.GetControlPlaneRequest{Project: "p1", Name: "lc1"})
	require.Equal(t, codes.NotFound, errs.Code(err), "nothing stored")
}

// TestSetControlPlaneCA: core's internal RPC for seed 002's control-plane
// body stores the record with its CA (key sealed), replaces one there is,
// and names the body's own fields (ca-cert, not control_plane.ca-cert)
// when it refuses, storing nothing.
func TestSetControlPlaneCA(t *testing.T) {
	t.Parallel()
	c := serve(t, newFakeCadist(t))
	ctx := context.Background()
	root := newCA(t, "set root", nil, "")
	inter := newCA(t, "set intermediate", root, "")
	other := newCA(t, "set other root", nil, "")
	good := func() *servicemeshv1.ControlPlane {
		return &servicemeshv1.ControlPlane{Name: "lc1", Namespace: "lc1-mesh", CaCert: inter.certPEM, CaKey: inter.keyPEM, RootCert: root.certPEM, CertChain: inter.certPEM + root.certPEM}
	}
	for _, tc := range []struct {
		name  string
		edit  func(cp *servicemeshv1.ControlPlane)
		field string
	}{
		{"no CA", func(cp *servicemeshv1.ControlPlane) { cp.CaCert, cp.CaKey, cp.RootCert, cp.CertChain = "", "", "", "" }, "ca-cert"},
		{"key missing", func(cp *servicemeshv1.ControlPlane) { cp.CaKey = "" }, "ca-key"},
		{"cert not PEM", func(cp *servicemeshv1.ControlPlane) { cp.CaCert = "not pem" }, "ca-cert"},
		{"chain to another root", func(cp *servicemeshv1.ControlPlane) { cp.RootCert = other.certPEM }, "cert-chain"},
		{"namespace not a label", func(cp *servicemeshv1.ControlPlane) { cp.Namespace = "Not_A_Label" }, "namespace"},
	} {
		cp := good()
		tc.edit(cp)
		_, err := c.in.SetControlPlaneCA(ctx, &servicemeshv1.SetControlPlaneCARequest{Project: "p1", ControlPlane: cp})
		require.Equal(t, codes.InvalidArgument, errs.Code(err), "%s: %v", tc.name, err)
		require.Equal(t, tc.field, errs.FieldOf(errs.ToStatus(err)), "%s: %v", tc.name, err)
	}
	_, err := c.pub.GetControlPlane(ctx, &servicemeshv1.GetControlPlaneRequest{Project: "p1", Name: "lc1"})
	require.Equal(t, codes.NotFound, errs.Code(err), "nothing stored")

	resp, err := c.in.SetControlPlaneCA(ctx, &servicemeshv1.SetControlPlaneCARequest{Project: "p1", ControlPlane: good()})
	require.NoError(t, err)
	require.True(t, resp.GetControlPlane().GetCustomCa())
	require.Empty(t, resp.GetControlPlane().GetCaKey())
	// Again, now replacing the record.
	resp, err = c.in.SetControlPlaneCA(ctx, &servicemeshv1.SetControlPlaneCARequest{Project: "p1", ControlPlane: good()})
	require.NoError(t, err)
	got, err := c.pub.GetControlPlane(ctx, &servicemeshv1.GetControlPlaneRequest{Project: "p1", Name: "lc1"})
	require.NoError(t, err)
	require.Equal(t, "lc1-mesh", got.GetControlPlane().GetNamespace())
	require.True(t, got.GetControlPlane().GetCustomCa())
	requireNoKeyAtRest(t, c.st, inter.keyPEM)
	r, err := c.in.RenderControlPlanes(ctx, meshRequest("lc1"))
	require.NoError(t, err)
	require.Equal(t, "lc1-mesh", r.GetIstioNamespace(), "%v", resp)
}
