package servicemesh

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/servicemesh/internal/render"
)

// Internal is the service mesh service's internal API (callers: core).
type Internal struct {
	servicemeshv1.UnimplementedServiceMeshInternalServiceServer
	s *Service
}

// Register serves the internal API on r.
func (in *Internal) Register(r grpc.ServiceRegistrar) {
	servicemeshv1.RegisterServiceMeshInternalServiceServer(r, in)
}

// crds are Istio's CRDs, read once.
var crds = sync.OnceValues(render.CRDs)

// RenderControlPlanes implements servicemeshv1.ServiceMeshInternalServiceServer.
func (in *Internal) RenderControlPlanes(ctx context.Context, req *servicemeshv1.RenderControlPlanesRequest) (*servicemeshv1.RenderControlPlanesResponse, error) {
	s := in.s
	project, lc := req.GetProject(), req.GetLogicalCloud()
	var cp *servicemeshv1.ControlPlane
	rec, err := s.planes.Get(ctx, store.Key(project, lc))
	switch {
	case err == nil:
		cp = rec.Msg
	case errs.Code(err) != codes.NotFound:
		return nil, err
	case !req.GetEnabled():
		return &servicemeshv1.RenderControlPlanesResponse{Enabled: false}, nil
	}
	if len(lc) > render.MaxRevision {
		return nil, errs.Invalid("logical-cloud", "a service mesh's logical cloud name is at most %d characters (istiod-<name> names a Service)", render.MaxRevision)
	}
	ns := req.GetIstioNamespace()
	switch {
	case ns != "":
	case cp.GetNamespace() != "":
		ns = cp.GetNamespace()
	default:
		ns = istioNamespace(lc)
	}
	if err := checkNamespace("istio-namespace", ns); err != nil {
		return nil, err
	}
	crdList, err := crds()
	if err != nil {
		return nil, errs.Internal(err, "read Istio's CRDs")
	}
	rev, err := in.revision(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	if wns := req.GetNamespace(); wns != "" {
		if err := checkNamespace("namespace", wns); err != nil {
			return nil, err
		}
	}
	in0 := render.Input{
		Project: project, LogicalCloud: lc, IstioNamespace: ns, WorkloadNamespace: req.GetNamespace(), Revision: rev,
		TrustDomain: s.trustDomain(project, lc), Hub: s.opts.Hub, Tag: s.opts.Tag,
	}
	cas, err := in.cas(ctx, req, cp, in0.TrustDomain, ns)
	if err != nil {
		return nil, err
	}
	for i, t := range req.GetClusters() {
		if ip := t.GetLoadbalancerIp(); ip != "" {
			if _, err := kube.CheckIP(ip); err != nil {
				return nil, errs.Invalid("loadbalancer-ip", "cluster reference %s/%s: %v", t.GetProvider(), t.GetCluster(), err)
			}
		}
		in0.Clusters = append(in0.Clusters, render.Cluster{
			Provider: t.GetProvider(), Cluster: t.GetCluster(), LoadBalancerIP: t.GetLoadbalancerIp(), CA: cas[i].ca,
		})
	}
	out, err := render.Render(in0)
	if err != nil {
		return nil, errs.Internal(err, "render the control planes")
	}
	doc := &servicemeshv1.ServiceMesh{
		Project: project, LogicalCloud: lc, Revision: rev, IstioNamespace: ns,
		TrustDomain: in0.TrustDomain, MeshId: render.MeshID(project, lc), CustomCa: cp.GetCustomCa(),
	}
	resp := &servicemeshv1.RenderControlPlanesResponse{Enabled: true, Revision: rev, IstioNamespace: ns, Crds: crdList}
	all := sha256.New()
	for i, c := range out {
		cm := &servicemeshv1.ClusterManifests{Provider: c.Provider, Cluster: c.Cluster}
		one := sha256.New()
		var stored []string
		for _, m := range c.Manifests {
			cm.Manifests = append(cm.Manifests, &servicemeshv1.Manifest{Json: m.JSON, Sensitive: m.Sensitive})
			one.Write([]byte(m.JSON + "\n"))
			all.Write([]byte(m.JSON + "\n"))
			if m.Sensitive {
				pub, err := withoutKey(m.JSON)
				if err != nil {
					return nil, errs.Internal(err, "render the control planes")
				}
				stored = append(stored, pub)
				continue
			}
			stored = append(stored, m.JSON)
		}
		resp.Clusters = append(resp.Clusters, cm)
		t := req.GetClusters()[i]
		doc.Clusters = append(doc.Clusters, &servicemeshv1.ClusterMesh{
			ClusterProvider: c.Provider, Cluster: c.Cluster, Network: kube.MeshClusterID(c.Provider, c.Cluster),
			EastWestAddress: t.GetLoadbalancerIp(), BundleSerial: cas[i].serial,
			CaCert: cas[i].ca.CACert, CertChain: cas[i].ca.CertChain, RootCert: cas[i].ca.RootCert, NotAfter: cas[i].notAfter,
			Digest: hex.EncodeToString(one.Sum(nil)), Manifests: stored,
		})
	}
	doc.Digest = hex.EncodeToString(all.Sum(nil))
	if err := in.store(ctx, doc); err != nil {
		return nil, err
	}
	return resp, nil
}

// revision is the logical cloud's Istio revision: the one its live
// document records (a mesh made before revisions were derived keeps its
// logical cloud's name: changing it would replace its istiod and leave its
// running sidecars without one), else render.Revision, unique per project
// and logical cloud.
func (in *Internal) revision(ctx context.Context, project, lc string) (string, error) {
	doc, err := in.s.meshes.Get(ctx, store.Key(project, lc))
	switch {
	case errs.Code(err) == codes.NotFound:
	case err != nil:
		return "", err
	case !doc.Msg.GetReleased() && doc.Msg.GetRevision() != "":
		return doc.Msg.GetRevision(), nil
	}
	return render.Revision(project, lc), nil
}

// clusterCA is a cluster's CA with what the document shows of it.
type clusterCA struct {
	ca               render.CA
	serial, notAfter string
}

// cas are the clusters' CAs, in the request's order: the control plane
// record's own CA on every cluster, else CA distribution's intermediates
// (issued for all clusters first, then each read with its key), which
// permit DNS names under the logical cloud's namespace and its Istio
// namespace istioNS only.
func (in *Internal) cas(ctx context.Context, req *servicemeshv1.RenderControlPlanesRequest, cp *servicemeshv1.ControlPlane, trustDomain, istioNS string) ([]clusterCA, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	out := make([]clusterCA, 0, len(req.GetClusters()))
	if cp.GetCustomCa() {
		key, err := in.s.planes.Secret(ctx, store.Key(project, lc), caKeySecret)
		if err != nil {
			return nil, err
		}
		ca := render.CA{CACert: cp.GetCaCert(), CAKey: string(key), CertChain: cp.GetCertChain(), RootCert: cp.GetRootCert()}
		serial, notAfter := certInfo(cp.GetCaCert())
		for range req.GetClusters() {
			out = append(out, clusterCA{ca: ca, serial: serial, notAfter: notAfter})
		}
		return out, nil
	}
	if len(req.GetClusters()) == 0 {
		return out, nil
	}
	if in.s.cadist == nil {
		return nil, errs.Unavailable(nil, "CA distribution is not configured")
	}
	mc := make([]*cadistv1.MeshCluster, 0, len(req.GetClusters()))
	for _, t := range req.GetClusters() {
		mc = append(mc, &cadistv1.MeshCluster{Provider: t.GetProvider(), Cluster: t.GetCluster()})
	}
	if _, err := in.s.cadist.IssueIntermediates(ctx, &cadistv1.IssueIntermediatesRequest{
		Project: project, LogicalCloud: lc, Root: req.GetCaRoot(), TrustDomain: trustDomain, Clusters: mc,
		Namespaces: slices.Compact(slices.DeleteFunc([]string{istioNS, req.GetNamespace()}, func(n string) bool { return n == "" })),
	}); err != nil {
		return nil, err
	}
	for _, c := range mc {
		r, err := in.s.cadist.GetIntermediate(ctx, &cadistv1.GetIntermediateRequest{Project: project, LogicalCloud: lc, Cluster: c})
		if err != nil {
			return nil, err
		}
		b := r.GetBundle()
		if b.GetCaCert() == "" || r.GetCaKey() == "" {
			return nil, errs.Internal(nil, "CA distribution answered no intermediate for %s/%s", c.GetProvider(), c.GetCluster())
		}
		out = append(out, clusterCA{
			ca:     render.CA{CACert: b.GetCaCert(), CAKey: r.GetCaKey(), CertChain: b.GetCertChain(), RootCert: b.GetRootCert()},
			serial: b.GetSerial(), notAfter: b.GetNotAfter(),
		})
	}
	return out, nil
}

// withoutKey is the cacerts Secret manifest without ca-key.pem: what the
// document keeps.
func withoutKey(manifest string) (string, error) {
	var o map[string]any
	if err := json.Unmarshal([]byte(manifest), &o); err != nil {
		return "", err
	}
	if data, ok := o["data"].(map[string]any); ok {
		delete(data, "ca-key.pem")
	}
	b, err := json.Marshal(o)
	return string(b), err
}

// store writes the document, over the one before (the last render wins).
func (in *Internal) store(ctx context.Context, doc *servicemeshv1.ServiceMesh) error {
	id := store.Key(doc.GetProject(), doc.GetLogicalCloud())
	cur, err := in.s.meshes.Get(ctx, id)
	switch {
	case err == nil:
		return in.s.meshes.Update(ctx, id, cur.Version, doc)
	case errs.Code(err) == codes.NotFound:
		return in.s.meshes.Create(ctx, id, doc.GetProject(), doc)
	}
	return err
}

// ReleaseControlPlanes implements servicemeshv1.ServiceMeshInternalServiceServer:
// a logical cloud that had a service mesh has its intermediates revoked
// and its document marked released; one that never had one, nothing.
func (in *Internal) ReleaseControlPlanes(ctx context.Context, req *servicemeshv1.ReleaseControlPlanesRequest) (*servicemeshv1.ReleaseControlPlanesResponse, error) {
	id := store.Key(req.GetProject(), req.GetLogicalCloud())
	doc, err := in.s.meshes.Get(ctx, id)
	if errs.Code(err) == codes.NotFound {
		return &servicemeshv1.ReleaseControlPlanesResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if doc.Msg.GetReleased() {
		return &servicemeshv1.ReleaseControlPlanesResponse{}, nil
	}
	if !doc.Msg.GetCustomCa() {
		if in.s.cadist == nil {
			return nil, errs.Unavailable(nil, "CA distribution is not configured")
		}
		if _, err := in.s.cadist.RevokeIntermediates(ctx, &cadistv1.RevokeIntermediatesRequest{
			Project: req.GetProject(), LogicalCloud: req.GetLogicalCloud(),
		}); err != nil {
			return nil, err
		}
	}
	if _, err := in.s.meshes.Modify(ctx, id, func(m *servicemeshv1.ServiceMesh) error {
		m.Released = true
		return nil
	}); err != nil {
		return nil, err
	}
	return &servicemeshv1.ReleaseControlPlanesResponse{}, nil
}

// SetControlPlaneCA implements servicemeshv1.ServiceMeshInternalServiceServer:
// the record is checked as CreateControlPlane checks it, its fields named as
// in core's seed 002 body (ca-cert, not control_plane.ca-cert), and must
// carry a CA; it is created, or replaces the one there is at the version
// read (a concurrent writer: Aborted, retry).
func (in *Internal) SetControlPlaneCA(ctx context.Context, req *servicemeshv1.SetControlPlaneCARequest) (*servicemeshv1.SetControlPlaneCAResponse, error) {
	cp := req.GetControlPlane()
	secrets, err := prepare(atTop, cp)
	if err != nil {
		return nil, err
	}
	if !cp.GetCustomCa() {
		return nil, errs.Invalid("ca-cert", "is required: without a CA of its own the control plane signs with CA distribution's intermediates, and needs no record")
	}
	id := store.Key(req.GetProject(), cp.GetName())
	cur, err := in.s.planes.Get(ctx, id)
	switch {
	case errs.Code(err) == codes.NotFound:
		err = in.s.planes.Create(ctx, id, req.GetProject(), cp, secrets...)
	case err == nil:
		err = in.s.planes.Update(ctx, id, cur.Version, cp, secrets...)
	}
	if err != nil {
		return nil, err
	}
	return &servicemeshv1.SetControlPlaneCAResponse{ControlPlane: cp}, nil
}

// PurgeLogicalCloud implements servicemeshv1.ServiceMeshInternalServiceServer.
func (in *Internal) PurgeLogicalCloud(ctx context.Context, req *servicemeshv1.PurgeLogicalCloudRequest) (*servicemeshv1.PurgeLogicalCloudResponse, error) {
	id := store.Key(req.GetProject(), req.GetLogicalCloud())
	for _, del := range []func(context.Context, string) error{in.s.meshes.Delete, in.s.planes.Delete} {
		if err := del(ctx, id); err != nil && errs.Code(err) != codes.NotFound {
			return nil, err
		}
	}
	return &servicemeshv1.PurgeLogicalCloudResponse{}, nil
}
