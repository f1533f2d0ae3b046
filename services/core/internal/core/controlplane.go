package core

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	servicemeshv1 "github.com/dcm-project/dcm/gen/dcm/servicemesh/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// Seed 002's POST .../logical-clouds/control-plane is core's: it may create
// the logical cloud, which only core does. A CA of the body's own is the
// service mesh service's to check and keep (key sealed), so core tells it
// (SetControlPlaneCA); the service mesh service never calls core.

// meshNamespaceBodyField is the Istio namespace as seed 002's control-plane
// body names it.
const meshNamespaceBodyField = "namespace"

// ControlPlanes is seed 002's POST .../control-plane: a logical cloud
// created with its mesh on, or an existing one's mesh turned on, with a CA
// of the body's own.
type ControlPlanes struct {
	*cloudReader
	lcs          *Clouds
	meshes       *Meshes
	meshInternal servicemeshv1.ServiceMeshInternalServiceClient
	// Tenancy is the installation's isolation settings.
	tenancy Tenancy
}

// CreateMeshLogicalCloud implements corev1.LogicalCloudServiceServer: a new
// logical cloud is created as CreateLogicalCloud creates the flat body's,
// with spec.service-mesh enabled in the body's namespace; an existing one
// has its mesh turned on (no user, resources, cluster-labels or description
// then: 409). A CA in the body goes to the service mesh service first for a
// new logical cloud's record is stored, and before an existing one is
// changed: refused (400 naming the field), nothing of the request stays.
func (s *ControlPlanes) CreateMeshLogicalCloud(ctx context.Context, req *corev1.CreateMeshLogicalCloudRequest) (*corev1.CreateMeshLogicalCloudResponse, error) {
	project, name := req.GetProject(), req.GetName()
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	cur, err := s.cloud(ctx, project, name)
	switch {
	case errs.Code(err) == codes.NotFound:
		// A missing project is NotFound at the create too.
		return s.createMeshCloud(ctx, req)
	case err != nil:
		return nil, err
	}
	return s.enableMesh(ctx, req, cur)
}

// createMeshCloud creates the body's logical cloud, mesh on.
func (s *ControlPlanes) createMeshCloud(ctx context.Context, req *corev1.CreateMeshLogicalCloudRequest) (*corev1.CreateMeshLogicalCloudResponse, error) {
	p, err := planMeshCloud(req, grants{Tenancy: s.tenancy, mayGrant: server.MayGrant(ctx)})
	if err != nil {
		return nil, err
	}
	ctx, release, err := s.meshes.meshSlot(ctx, req.GetProject(), req.GetName())
	if err != nil {
		return nil, err
	}
	defer release()
	var first func(context.Context) error
	if customCA(req) {
		first = func(ctx context.Context) error { return s.setControlPlaneCA(ctx, req) }
	}
	if _, err := s.lcs.create(ctx, req.GetProject(), p, first); err != nil {
		return nil, err
	}
	return s.meshAnswer(ctx, req.GetProject(), proto.CloneOf(p.lc), createdMessage(p)), nil
}

// planMeshCloud plans a new logical cloud from the control-plane body: the
// flat body's plan (planFlat), with the mesh on in the body's namespace.
func planMeshCloud(req *corev1.CreateMeshLogicalCloudRequest, g grants) (*plan, error) {
	p, err := planFlat(&corev1.CreateLogicalCloudRequest{
		Project: req.GetProject(), Name: req.GetName(), Description: req.GetDescription(),
		ClusterLabels: req.GetClusterLabels(), Resources: req.GetResources(), User: req.GetUser(),
	}, g)
	if err != nil {
		return nil, err
	}
	spec := p.lc.GetSpec()
	mesh, _, err := planMesh(&corev1.LogicalCloudSpec{ServiceMesh: &corev1.ServiceMesh{Enabled: true, Namespace: req.GetNamespace()}},
		req.GetName(), spec.GetLevel(), spec.GetNamespace(), g.Reserved, meshNamespaceBodyField)
	if err != nil {
		return nil, err
	}
	spec.ServiceMesh = mesh
	return p, nil
}

// enableMesh turns existing logical cloud cur's mesh on in the body's
// namespace, conditionally on the version read (a concurrent change:
// Aborted, retry).
func (s *ControlPlanes) enableMesh(ctx context.Context, req *corev1.CreateMeshLogicalCloudRequest, cur *corev1.LogicalCloud) (*corev1.CreateMeshLogicalCloudResponse, error) {
	project, name := req.GetProject(), req.GetName()
	if field := newCloudOnly(req); field != "" {
		return nil, errs.AlreadyExists("logical cloud %q exists: %s is for a new logical cloud only (users are added at .../users, permissions at .../user-permissions, quotas at .../cluster-quotas, clusters at .../cluster-references)", name, field)
	}
	spec := cur.GetSpec()
	mesh, _, err := planMesh(&corev1.LogicalCloudSpec{ServiceMesh: &corev1.ServiceMesh{Enabled: true, Namespace: req.GetNamespace()}},
		name, spec.GetLevel(), spec.GetNamespace(), s.tenancy.Reserved, meshNamespaceBodyField)
	if err != nil {
		return nil, err
	}
	if !spec.GetServiceMesh().GetEnabled() {
		var release func()
		if ctx, release, err = s.meshes.meshSlot(ctx, project, name); err != nil {
			return nil, err
		}
		defer release()
	}
	if customCA(req) {
		// The record alone turns the mesh on at the next render; it is
		// stored before the logical cloud changes, so a refused CA changes
		// nothing.
		if err := s.setControlPlaneCA(ctx, req); err != nil {
			return nil, err
		}
	}
	c, err := s.clouds.Modify(ctx, store.Key(project, name), func(c *corev1.LogicalCloud) error {
		// Takes effect on the next .../apply or .../update, as an update
		// of spec.service-mesh does.
		c.Spec.ServiceMesh = mesh
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.meshAnswer(ctx, req.GetProject(), c, "service mesh enabled on the logical cloud"), nil
}

// meshAnswer is the 201 body: the logical cloud as shown, and seed 002's
// name, user and message.
func (s *ControlPlanes) meshAnswer(ctx context.Context, project string, c *corev1.LogicalCloud, msg string) *corev1.CreateMeshLogicalCloudResponse {
	s.lcs.shown(ctx, project, c)
	return &corev1.CreateMeshLogicalCloudResponse{LogicalCloud: c, Message: msg,
		Name: c.GetMetadata().GetName(), User: c.GetSpec().GetUser().GetUserName()}
}

// newCloudOnly names the first field of the body that only a new logical
// cloud takes ("" if none is given).
func newCloudOnly(req *corev1.CreateMeshLogicalCloudRequest) string {
	switch {
	case given(req.GetUser()):
		return "user"
	case req.GetResources() != nil:
		return "resources"
	case strings.TrimSpace(req.GetClusterLabels()) != "":
		return "cluster-labels"
	case req.GetDescription() != "":
		return "description"
	}
	return ""
}

// given tells whether a JSON value is there and not null.
func given(v *structpb.Value) bool {
	_, null := v.GetKind().(*structpb.Value_NullValue)
	return v.GetKind() != nil && !null
}

// customCA tells whether the body gives any of the CA fields: then the
// service mesh service checks them (all four or none) and keeps them.
func customCA(req *corev1.CreateMeshLogicalCloudRequest) bool {
	for _, f := range []string{req.GetCaCert(), req.GetCaKey(), req.GetRootCert(), req.GetCertChain()} {
		if strings.TrimSpace(f) != "" {
			return true
		}
	}
	return false
}

// setControlPlaneCA tells the service mesh service the logical cloud's own
// CA; it answers 400 naming the body's field when it refuses it.
func (s *ControlPlanes) setControlPlaneCA(ctx context.Context, req *corev1.CreateMeshLogicalCloudRequest) error {
	_, err := s.meshInternal.SetControlPlaneCA(ctx, &servicemeshv1.SetControlPlaneCARequest{
		Project: req.GetProject(),
		ControlPlane: &servicemeshv1.ControlPlane{Name: req.GetName(), Namespace: req.GetNamespace(),
			CaCert: req.GetCaCert(), CaKey: req.GetCaKey(), RootCert: req.GetRootCert(), CertChain: req.GetCertChain()},
	})
	return err
}
