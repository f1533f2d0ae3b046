// Package namespace implements the namespace service: whether a logical
// cloud's namespace is there to be applied (its record; DELETE
// .../namespaces removes it), shown with the labels it gets on every
// cluster and the clusters it is made on, and rendered as the Namespace
// object that applying the logical cloud puts on them. The namespace's
// name is core's alone (the logical cloud's spec.namespace): REST reads
// it from the facts core told the service (platform/facts), and a render
// takes it from core's request. It does not talk to clusters, and it never
// calls core: core tells it what it needs.
package namespace

import (
	"cmp"
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/util/validation"

	namespacev1 "github.com/dcm-project/dcm/gen/dcm/namespace/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/store"
)

// Service is the namespace service's gRPC API.
type Service struct {
	namespacev1.UnimplementedNamespaceServiceServer
	namespacev1.UnimplementedNamespaceInternalServiceServer
	namespaces *store.Records[*namespacev1.Namespace]
	// facts are the logical clouds as core told them (PutLogicalCloudFacts).
	facts *facts.Facts
	// podSecurity is the Pod Security Admission level of a logical cloud
	// that sets none (DCM_POD_SECURITY).
	podSecurity string
	// egressCIDRs are the CIDRs outside the cluster every logical cloud's
	// pods may reach (DCM_TENANT_EGRESS_CIDRS).
	egressCIDRs []string
}

// New opens the service's collections on st (its namespaces and its copy
// of the logical clouds' facts, which answer whether a logical cloud
// exists and which clusters it references). podSecurity is
// the level enforced in a namespace whose logical cloud sets none:
// baseline (the default when empty) or restricted. egressCIDRs are the
// CIDRs outside the cluster the logical clouds' pods may reach, comma
// separated (DCM_TENANT_EGRESS_CIDRS; empty: none): one that is no CIDR is
// an error.
func New(st *store.Store, podSecurity, egressCIDRs string) (*Service, error) {
	podSecurity, err := kube.DefaultPodSecurity(podSecurity)
	if err != nil {
		return nil, err
	}
	cidrs, err := kube.ParseCIDRs("DCM_TENANT_EGRESS_CIDRS", egressCIDRs)
	if err != nil {
		return nil, err
	}
	return &Service{
		namespaces: store.NewRecords(st, NamespacesCollection, "namespace of logical cloud",
			func() *namespacev1.Namespace { return &namespacev1.Namespace{} }),
		facts:       facts.Open(st, "namespace"),
		podSecurity: podSecurity,
		egressCIDRs: cidrs,
	}, nil
}

// Register serves the public and the internal API on r.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	namespacev1.RegisterNamespaceServiceServer(r, s)
	namespacev1.RegisterNamespaceInternalServiceServer(r, s)
}

// cloud reads the facts core told of the logical cloud: NotFound if the
// service has none or it is being deleted.
func (s *Service) cloud(ctx context.Context, project, lc string) (*typesv1.LogicalCloudFacts, error) {
	return s.facts.Parent(ctx, project, lc)
}

func (s *Service) exists(ctx context.Context, project, lc string) error {
	_, err := s.cloud(ctx, project, lc)
	return err
}

// Facts is the service's copy of the logical clouds' facts, which core
// tells it through the facts contract (platform/facts.Serve).
func (s *Service) Facts() *facts.Facts { return s.facts }

// shown is the namespace named name (core's spec.namespace) with its
// derived labels.
func shown(project, lc, name string) *namespacev1.Namespace {
	return &namespacev1.Namespace{Name: name, Labels: kube.Labels(project, lc)}
}

// removed says whether a record is the mark DELETE .../namespaces leaves:
// the logical cloud is known, its namespace is not to be applied.
func removed(ns *namespacev1.Namespace) bool { return ns.GetName() == "" }

// CreateNamespace implements namespacev1.NamespaceInternalServiceServer.
// The record has the logical cloud's path as id: one namespace per
// logical cloud. Core calls it while it creates the logical cloud, so
// there is no pre-check: the after-insert check (CreateChecked) is what
// keeps an orphan out (docs/logical-clouds.md, "No orphans").
func (s *Service) CreateNamespace(ctx context.Context, req *namespacev1.CreateNamespaceRequest) (*namespacev1.CreateNamespaceResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	// The name is kept for records read by older versions; nothing reads
	// it now (core's spec.namespace is the one source). Labels are derived.
	ns := &namespacev1.Namespace{Name: req.GetNamespace().GetName()}
	err := s.namespaces.CreateChecked(ctx, store.Key(project, lc), project, ns, func(ctx context.Context) error {
		return s.exists(ctx, project, lc)
	})
	if err != nil {
		return nil, err
	}
	return &namespacev1.CreateNamespaceResponse{Namespace: shown(project, lc, ns.GetName())}, nil
}

// ListNamespaces implements namespacev1.NamespaceServiceServer: core's
// spec.namespace, unless DELETE .../namespaces removed it.
func (s *Service) ListNamespaces(ctx context.Context, req *namespacev1.ListNamespacesRequest) (*namespacev1.ListNamespacesResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	// Every cluster (the answer is not paged: one namespace), as core told
	// them.
	out := &namespacev1.ListNamespacesResponse{Clusters: append([]string{}, c.GetClusters()...), Namespaces: []*namespacev1.Namespace{}}
	ns, err := s.namespaces.Get(ctx, store.Key(project, lc))
	switch {
	case err == nil && !removed(ns.Msg) && c.GetNamespace() != "":
		out.Namespaces = append(out.Namespaces, shown(project, lc, c.GetNamespace()))
	case err == nil:
	case !isNotFound(err):
		return nil, err
	}
	return out, nil
}

// DeleteNamespaces implements namespacev1.NamespaceServiceServer: the
// logical cloud keeps its spec.namespace in core (the one source of the
// name), and the record keeps a mark (no name) that the namespace is
// removed: it is no longer listed, and applying the logical cloud is
// refused. A second DELETE is 404.
func (s *Service) DeleteNamespaces(ctx context.Context, req *namespacev1.DeleteNamespacesRequest) (*namespacev1.DeleteNamespacesResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if err := s.exists(ctx, project, lc); err != nil {
		return nil, err
	}
	_, err := s.namespaces.Modify(ctx, store.Key(project, lc), func(ns *namespacev1.Namespace) error {
		if removed(ns) {
			return errs.NotFound("logical cloud %q has no namespace", lc)
		}
		ns.Name = ""
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &namespacev1.DeleteNamespacesResponse{}, nil
}

// RenderNamespace implements namespacev1.NamespaceInternalServiceServer:
// the namespace core names in the request (its spec.namespace) as a
// Namespace object with the logical cloud's labels and its Pod Security
// Admission level (enforced, and warned and audited at the same level so
// that clients see why a pod is refused), followed by its default
// NetworkPolicies (netpol.go). It reads its own record only
// (was the namespace removed?) and never calls core.
func (s *Service) RenderNamespace(ctx context.Context, req *namespacev1.RenderNamespaceRequest) (*namespacev1.RenderNamespaceResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	if req.GetLevel() == kube.LevelAdmin {
		return nil, errs.FailedPrecondition("logical cloud %q: admin logical cloud has no namespace", lc)
	}
	// Core checked both when it stored the logical cloud; a request that
	// did not come from there gets a clear refusal, not a Namespace the
	// clusters would refuse on every apply.
	if err := checkRender(req); err != nil {
		return nil, err
	}
	ns, err := s.namespaces.Get(ctx, store.Key(project, lc))
	if isNotFound(err) {
		return nil, errs.NotFound("logical cloud %q of project %q has no namespace record", lc, project)
	}
	if err != nil {
		return nil, err
	}
	if removed(ns.Msg) || req.GetNamespace() == "" {
		return nil, errs.FailedPrecondition("logical cloud %q has no namespace (it was deleted): it cannot be applied", lc)
	}
	manifests := append([]string{s.manifest(project, lc, req.GetNamespace(), req.GetPodSecurity(), req.GetIstioRevision(), req.GetLabels())},
		s.networkPolicies(project, lc, req.GetNamespace(), req.GetIstioNamespace(), req.GetIngressFrom())...)
	return &namespacev1.RenderNamespaceResponse{Manifests: manifests}, nil
}

// IstioRevisionLabel selects the Istio control plane (revision) whose
// sidecar injector serves a namespace.
const IstioRevisionLabel = "istio.io/rev"

// checkRender refuses a namespace name that is no DNS-1123 label and a
// Pod Security level the API server's admission does not know (core's
// rules, kube.CheckPodSecurity, as an admin may set them).
func checkRender(req *namespacev1.RenderNamespaceRequest) error {
	if ns := req.GetNamespace(); ns != "" {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return errs.Invalid("namespace", "%q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
		}
	}
	if rev := req.GetIstioRevision(); rev != "" {
		if msgs := validation.IsValidLabelValue(rev); len(msgs) > 0 {
			return errs.Invalid("istio-revision", "%q is not a label value: %s", rev, strings.Join(msgs, "; "))
		}
	}
	if err := kube.CheckLabels("labels", req.GetLabels()); err != nil {
		return err
	}
	if err := checkNamespaces(req); err != nil {
		return err
	}
	return kube.CheckPodSecurity("pod-security", req.GetLevel(), req.GetPodSecurity(), true)
}

// manifest is the Namespace object named name of logical cloud lc, at Pod
// Security Admission level podSecurity (empty: the installation's), labelled
// istio.io/rev=<istioRevision> when the logical cloud's service mesh is
// enabled (its control plane's sidecar injector selects exactly that label),
// and with the logical cloud's own labels (checkRender refused any in the
// system's domains, so none replaces a derived one).
func (s *Service) manifest(project, lc, name, podSecurity, istioRevision string, own []*typesv1.Label) string {
	labels := kube.Labels(project, lc)
	for _, l := range own {
		labels[l.GetKey()] = l.GetValue()
	}
	level := cmp.Or(podSecurity, s.podSecurity)
	for _, mode := range []string{"enforce", "warn", "audit"} {
		labels[kube.PodSecurityLabelPrefix+mode] = level
	}
	if istioRevision != "" {
		labels[IstioRevisionLabel] = istioRevision
	}
	return kube.Manifest("v1", "Namespace", kube.Meta{Name: name, Labels: labels}, nil)
}

// PurgeLogicalCloud implements namespacev1.NamespaceInternalServiceServer.
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
