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
	lc, ok := c.clouds[store.Key(req.GetProject(), req.GetLogicalCloud())]
	if !ok {
		return nil, errs.NotFound("logical cloud %q of project %q not found", req.GetLogicalCloud(), req.GetProject())
	}
	return &corev1.GetLogicalCloudResponse{LogicalCloud: proto.Clone(lc).(*corev1.LogicalCloud)}, nil
}
