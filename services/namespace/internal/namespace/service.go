// Package namespace implements the namespace service: the namespace record
// of each logical cloud, shown with the labels it gets on every cluster
// and the clusters it is made on, and rendered as the Namespace object
// that applying the logical cloud puts on them. It does not talk to
// clusters; it asks core, over gRPC, whether a logical cloud exists, at
// which level, and which clusters it references.
package namespace

import (
	"cmp"
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/store"
)

// Service is the namespace service's gRPC API.
type Service struct {
	namespacev1.UnimplementedNamespaceServiceServer
	namespaces *store.Records[*namespacev1.Namespace]
	core       corev1.LogicalCloudServiceClient
	// podSecurity is the Pod Security Admission level of a logical cloud
	// that sets none (DCM_POD_SECURITY).
	podSecurity string
}

// New opens the service's collection on st; core answers whether a
// logical cloud exists and which clusters it references. podSecurity is
// the level enforced in a namespace whose logical cloud sets none:
// baseline (the default when empty) or restricted.
func New(st *store.Store, core corev1.LogicalCloudServiceClient, podSecurity string) (*Service, error) {
	switch podSecurity {
	case "":
		podSecurity = kube.PodSecurityBaseline
	case kube.PodSecurityBaseline, kube.PodSecurityRestricted:
	default:
		return nil, fmt.Errorf("DCM_POD_SECURITY %q: use %s or %s (privileged is set per logical cloud, by an admin)",
			podSecurity, kube.PodSecurityBaseline, kube.PodSecurityRestricted)
	}
	return &Service{
		namespaces: store.NewRecords(st, "namespaces", "namespace of logical cloud",
			func() *namespacev1.Namespace { return &namespacev1.Namespace{} }),
		core:        core,
		podSecurity: podSecurity,
	}, nil
}

// Register serves the API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) { namespacev1.RegisterNamespaceServiceServer(r, s) }

// cloud reads the logical cloud from core: NotFound if it or its project
// is missing or being deleted.
func (s *Service) cloud(ctx context.Context, project, lc string) (*corev1.LogicalCloud, error) {
	resp, err := s.core.GetLogicalCloud(ctx, &corev1.GetLogicalCloudRequest{Project: project, LogicalCloud: lc})
	if err != nil {
		return nil, err
	}
	return resp.GetLogicalCloud(), nil
}

func (s *Service) exists(ctx context.Context, project, lc string) error {
	_, err := s.cloud(ctx, project, lc)
	return err
}

// shown is a stored namespace with its derived labels.
func shown(project, lc string, ns *namespacev1.Namespace) *namespacev1.Namespace {
	return &namespacev1.Namespace{Name: ns.GetName(), Labels: kube.Labels(project, lc)}
}

// CreateNamespace implements namespacev1.NamespaceServiceServer. The
// record has the logical cloud's path as id: one namespace per logical
// cloud.
func (s *Service) CreateNamespace(ctx context.Context, req *namespacev1.CreateNamespaceRequest) (*namespacev1.CreateNamespaceResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if err := s.exists(ctx, project, lc); err != nil {
		return nil, err
	}
	ns := &namespacev1.Namespace{Name: req.GetNamespace().GetName()} // labels are derived, not stored
	err := s.namespaces.CreateChecked(ctx, store.Key(project, lc), project, ns, func(ctx context.Context) error {
		return s.exists(ctx, project, lc)
	})
	if err != nil {
		return nil, err
	}
	return &namespacev1.CreateNamespaceResponse{Namespace: shown(project, lc, ns)}, nil
}

// ListNamespaces implements namespacev1.NamespaceServiceServer.
func (s *Service) ListNamespaces(ctx context.Context, req *namespacev1.ListNamespacesRequest) (*namespacev1.ListNamespacesResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	refs, err := s.core.ListClusterReferences(ctx, &corev1.ListClusterReferencesRequest{Project: project, LogicalCloud: lc})
	if err != nil {
		return nil, err
	}
	out := &namespacev1.ListNamespacesResponse{Clusters: []string{}, Namespaces: []*namespacev1.Namespace{}}
	for _, r := range refs.GetClusterReferences() {
		out.Clusters = append(out.Clusters, store.Key(r.GetClusterProvider(), r.GetClusterName()))
	}
	ns, err := s.namespaces.Get(ctx, store.Key(project, lc))
	switch {
	case err == nil:
		out.Namespaces = append(out.Namespaces, shown(project, lc, ns.Msg))
	case !isNotFound(err):
		return nil, err
	}
	return out, nil
}

// DeleteNamespaces implements namespacev1.NamespaceServiceServer.
func (s *Service) DeleteNamespaces(ctx context.Context, req *namespacev1.DeleteNamespacesRequest) (*namespacev1.DeleteNamespacesResponse, error) {
	if err := s.exists(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
		return nil, err
	}
	if err := s.namespaces.Delete(ctx, store.Key(req.GetProject(), req.GetLogicalCloud())); err != nil {
		return nil, err
	}
	return &namespacev1.DeleteNamespacesResponse{}, nil
}

// RenderNamespace implements namespacev1.NamespaceServiceServer: the
// stored namespace as a Namespace object with the logical cloud's labels
// and its Pod Security Admission level (enforced, and warned and audited
// at the same level so that clients see why a pod is refused).
func (s *Service) RenderNamespace(ctx context.Context, req *namespacev1.RenderNamespaceRequest) (*namespacev1.RenderNamespaceResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	if c.GetSpec().GetLevel() == kube.LevelAdmin {
		return nil, errs.FailedPrecondition("logical cloud %q: admin logical cloud has no namespace", lc)
	}
	ns, err := s.namespaces.Get(ctx, store.Key(project, lc))
	if isNotFound(err) {
		return nil, errs.FailedPrecondition("logical cloud %q has no namespace (it was deleted): it cannot be applied", lc)
	}
	if err != nil {
		return nil, err
	}
	labels := kube.Labels(project, lc)
	level := cmp.Or(c.GetSpec().GetPodSecurity(), s.podSecurity)
	for _, mode := range []string{"enforce", "warn", "audit"} {
		labels[kube.PodSecurityLabelPrefix+mode] = level
	}
	m := kube.Manifest("v1", "Namespace", kube.Meta{Name: ns.Msg.GetName(), Labels: labels}, nil)
	return &namespacev1.RenderNamespaceResponse{Manifests: []string{m}}, nil
}

// PurgeLogicalCloud implements namespacev1.NamespaceServiceServer.
func (s *Service) PurgeLogicalCloud(ctx context.Context, req *namespacev1.PurgeLogicalCloudRequest) (*namespacev1.PurgeLogicalCloudResponse, error) {
	err := s.namespaces.Delete(ctx, store.Key(req.GetProject(), req.GetLogicalCloud()))
	if isNotFound(err) {
		return &namespacev1.PurgeLogicalCloudResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	return &namespacev1.PurgeLogicalCloudResponse{Removed: 1}, nil
}

func isNotFound(err error) bool { return errs.Code(err) == codes.NotFound }
