package servicemesh

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/validation"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/servicemesh/internal/render"
)

// caKeySecret names the sealed ca-key of a control plane record.
const caKeySecret = "ca-key"

// Options are the installation's settings for control planes.
type Options struct {
	// Hub and Tag are Istio's images (DCM_ISTIO_HUB, DCM_ISTIO_TAG).
	Hub, Tag string
	// TrustDomainSuffix ends every logical cloud's trust domain,
	// <lc>.<project>.<suffix> (DCM_MESH_TRUST_DOMAIN).
	TrustDomainSuffix string
}

// DefaultOptions are the settings' defaults (tests).
var DefaultOptions = Options{Hub: "docker.io/istio", Tag: "1.31.0", TrustDomainSuffix: "dcm.local"}

// Service is the service-mesh service's gRPC API.
type Service struct {
	servicemeshv1.UnimplementedServiceMeshServiceServer
	planes *store.Records[*servicemeshv1.ControlPlane]
	meshes *store.Records[*servicemeshv1.ServiceMesh]
	cadist cadistv1.CaDistInternalServiceClient
	opts   Options
}

// New opens the service's collections on st; cadist issues the
// intermediates the control planes sign with.
func New(st *store.Store, cadist cadistv1.CaDistInternalServiceClient, opts Options) *Service {
	return &Service{
		planes: store.NewRecords(st, ControlPlanesCollection, "control plane",
			func() *servicemeshv1.ControlPlane { return &servicemeshv1.ControlPlane{} }),
		meshes: store.NewRecords(st, ServiceMeshesCollection, "service mesh",
			func() *servicemeshv1.ServiceMesh { return &servicemeshv1.ServiceMesh{} }),
		cadist: cadist,
		opts:   opts,
	}
}

// Register serves the API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	servicemeshv1.RegisterServiceMeshServiceServer(r, s)
}

// Internal is the internal API (ServiceMeshInternalService) over the same
// records.
func (s *Service) Internal() *Internal { return &Internal{s: s} }

// istioNamespace is the default istio namespace of logical cloud lc.
func istioNamespace(lc string) string { return lc + "-istio-system" }

// checkNamespace refuses an istio namespace that is no DNS-1123 label.
func checkNamespace(field, ns string) error {
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		return errs.Invalid(field, "%q is not a namespace name (DNS-1123 label): %s", ns, strings.Join(msgs, "; "))
	}
	return nil
}

// CreateControlPlane implements servicemeshv1.ServiceMeshServiceServer. The
// Istio namespace defaults to "<logical cloud>-istio-system", as the design
// pages name it. A CA of the body's own is checked, its key sealed.
func (s *Service) CreateControlPlane(ctx context.Context, req *servicemeshv1.CreateControlPlaneRequest) (*servicemeshv1.CreateControlPlaneResponse, error) {
	cp := req.GetControlPlane()
	secrets, err := prepare(inControlPlane, cp)
	if err != nil {
		return nil, err
	}
	if err := s.planes.Create(ctx, store.Key(req.GetProject(), cp.GetName()), req.GetProject(), cp, secrets...); err != nil {
		return nil, err
	}
	return &servicemeshv1.CreateControlPlaneResponse{ControlPlane: cp}, nil
}

// prepare checks control plane record cp (its fields named after prefix)
// and makes it as stored: the namespace defaulted, custom_ca set, the key
// moved out to the sealed secrets it answers.
func prepare(prefix string, cp *servicemeshv1.ControlPlane) ([]store.Secret, error) {
	nsField := prefix + "namespace"
	if cp.GetNamespace() == "" {
		cp.Namespace = istioNamespace(cp.GetName())
		if err := checkNamespace(nsField, cp.GetNamespace()); err != nil {
			return nil, errs.Invalid(nsField, "is required for a logical cloud name over %d characters (%s)", 63-len("-istio-system"), err)
		}
	}
	if err := checkNamespace(nsField, cp.GetNamespace()); err != nil {
		return nil, err
	}
	if len(cp.GetName()) > render.MaxRevision {
		return nil, errs.Invalid(prefix+"name", "a service mesh's logical cloud name is at most %d characters (istiod-<name> names a Service)", render.MaxRevision)
	}
	custom, err := checkCustomCA(prefix, cp)
	if err != nil {
		return nil, err
	}
	cp.CustomCa = custom
	var secrets []store.Secret
	if custom {
		secrets = append(secrets, store.Secret{Name: caKeySecret, Value: []byte(cp.GetCaKey())})
	}
	cp.CaKey = ""
	return secrets, nil
}

// GetControlPlane implements servicemeshv1.ServiceMeshServiceServer.
func (s *Service) GetControlPlane(ctx context.Context, req *servicemeshv1.GetControlPlaneRequest) (*servicemeshv1.GetControlPlaneResponse, error) {
	cp, err := s.planes.Get(ctx, store.Key(req.GetProject(), req.GetName()))
	if err != nil {
		return nil, err
	}
	return &servicemeshv1.GetControlPlaneResponse{ControlPlane: cp.Msg}, nil
}

// ListControlPlanes implements servicemeshv1.ServiceMeshServiceServer.
func (s *Service) ListControlPlanes(ctx context.Context, req *servicemeshv1.ListControlPlanesRequest) (*servicemeshv1.ListControlPlanesResponse, error) {
	cps, next, err := s.planes.ListPage(ctx, req.GetProject(), store.PageOf(req))
	if err != nil {
		return nil, err
	}
	return &servicemeshv1.ListControlPlanesResponse{ControlPlanes: cps, NextPageToken: next}, nil
}

// DeleteControlPlane implements servicemeshv1.ServiceMeshServiceServer.
func (s *Service) DeleteControlPlane(ctx context.Context, req *servicemeshv1.DeleteControlPlaneRequest) (*servicemeshv1.DeleteControlPlaneResponse, error) {
	if err := s.planes.Delete(ctx, store.Key(req.GetProject(), req.GetName())); err != nil {
		return nil, err
	}
	return &servicemeshv1.DeleteControlPlaneResponse{}, nil
}

// GetServiceMesh implements servicemeshv1.ServiceMeshServiceServer: the
// stored document, its manifests only when asked for.
func (s *Service) GetServiceMesh(ctx context.Context, req *servicemeshv1.GetServiceMeshRequest) (*servicemeshv1.GetServiceMeshResponse, error) {
	doc, err := s.meshes.Get(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()))
	if err != nil {
		return nil, err
	}
	if !req.GetManifests() {
		for _, c := range doc.Msg.GetClusters() {
			c.Manifests = nil
		}
	}
	return &servicemeshv1.GetServiceMeshResponse{ServiceMesh: doc.Msg}, nil
}

// trustDomain is logical cloud lc's trust domain.
func (s *Service) trustDomain(project, lc string) string {
	return fmt.Sprintf("%s.%s.%s", lc, project, s.opts.TrustDomainSuffix)
}
