// Package coretest stands in for core in the tests of the services that
// ask it about logical clouds (namespace, user, quota): it answers
// GetLogicalCloud from the logical clouds a test adds. It stores nothing
// itself; the services under test run on the real store. How the services
// and the real core work together is tested on the whole program
// (services/allinone).
package coretest

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Core answers GetLogicalCloud as core does; any other call is a bug in
// the test and panics.
type Core struct {
	corev1.LogicalCloudServiceClient
	mu     sync.Mutex
	clouds map[string]*corev1.LogicalCloud
	// forbidden, once set by Forbid, fails its test at any call.
	forbidden testing.TB
}

// Forbid makes any later call to this core fail t: what runs after it
// (the internal RPCs core calls, such as renders) must not call core back.
// Forbid(nil) allows calls again.
func (c *Core) Forbid(t testing.TB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forbidden = t
}

// New returns a core that knows no logical cloud.
func New() *Core { return &Core{clouds: map[string]*corev1.LogicalCloud{}} }

// Add makes logical cloud lc of project exist at level (kube.LevelStandard,
// ...) with namespace ns (empty for admin), as core stores them resolved.
func (c *Core) Add(project, lc, level, ns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clouds[store.Key(project, lc)] = &corev1.LogicalCloud{
		Metadata: &typesv1.Metadata{Name: lc},
		Spec:     &corev1.LogicalCloudSpec{Level: level, Namespace: ns},
	}
}

// AddSpec makes logical cloud lc of project exist with spec as given.
func (c *Core) AddSpec(project, lc string, spec *corev1.LogicalCloudSpec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clouds[store.Key(project, lc)] = &corev1.LogicalCloud{Metadata: &typesv1.Metadata{Name: lc}, Spec: spec}
}

// Remove makes logical cloud lc of project missing.
func (c *Core) Remove(project, lc string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.clouds, store.Key(project, lc))
}

// GetLogicalCloud implements corev1.LogicalCloudServiceClient: NotFound
// for a logical cloud not added.
func (c *Core) GetLogicalCloud(_ context.Context, req *corev1.GetLogicalCloudRequest, _ ...grpc.CallOption) (*corev1.GetLogicalCloudResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.forbidden != nil {
		c.forbidden.Errorf("core was called back: GetLogicalCloud(%s/%s)", req.GetProject(), req.GetLogicalCloud())
		return nil, errs.FailedPrecondition("core may not be called here")
	}
	lc, ok := c.clouds[store.Key(req.GetProject(), req.GetLogicalCloud())]
	if !ok {
		return nil, errs.NotFound("logical cloud %q of project %q not found", req.GetLogicalCloud(), req.GetProject())
	}
	return &corev1.GetLogicalCloudResponse{LogicalCloud: proto.Clone(lc).(*corev1.LogicalCloud)}, nil
}

// ListClusterReferences implements corev1.LogicalCloudServiceClient: a
// logical cloud added references no cluster; NotFound for one not added.
func (c *Core) ListClusterReferences(ctx context.Context, req *corev1.ListClusterReferencesRequest, _ ...grpc.CallOption) (*corev1.ListClusterReferencesResponse, error) {
	if _, err := c.GetLogicalCloud(ctx, &corev1.GetLogicalCloudRequest{Project: req.GetProject(), LogicalCloud: req.GetLogicalCloud()}); err != nil {
		return nil, err
	}
	return &corev1.ListClusterReferencesResponse{}, nil
}

// Spec is what core holds of logical cloud lc of project, as core puts it
// in the requests it sends the services (their internal RPCs take it
// instead of calling core back); NotFound, as core answers, for one not
// added. It is the test's own read: Forbid does not apply.
func (c *Core) Spec(project, lc string) (*corev1.LogicalCloudSpec, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.clouds[store.Key(project, lc)]
	if !ok {
		return nil, errs.NotFound("logical cloud %q of project %q not found", lc, project)
	}
	return proto.Clone(got.GetSpec()).(*corev1.LogicalCloudSpec), nil
}
