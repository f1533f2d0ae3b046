// Package factstest tells the services under test (namespace, user,
// quota) the facts of logical clouds as core would (their
// PutLogicalCloudFacts, platform/facts): a test adds a logical cloud, and
// every copy it was given to keep gets its facts. How core and the
// services work together is tested on the whole program
// (services/allinone).
package factstest

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/store"
)

// Clouds are the logical clouds a test made, told to the copies it keeps.
type Clouds struct {
	t      testing.TB
	mu     sync.Mutex
	specs  map[string]*corev1.LogicalCloudSpec
	copies []*facts.Facts
}

// New returns no logical cloud; a failed tell fails t.
func New(t testing.TB) *Clouds { return &Clouds{t: t, specs: map[string]*corev1.LogicalCloudSpec{}} }

// Keep makes the service with store st named service (its facts
// collection, platform/facts.Open) told of every logical cloud added from
// now on, and of those added before.
func (c *Clouds) Keep(st *store.Store, service string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := facts.Open(st, service)
	c.copies = append(c.copies, f)
	for key, spec := range c.specs {
		project, lc := splitKey(key)
		c.put(f, project, lc, spec)
	}
}

func splitKey(key string) (string, string) {
	for i := range len(key) {
		if key[i] == '/' {
			return key[:i], key[i+1:]
		}
	}
	return key, ""
}

func (c *Clouds) put(f *facts.Facts, project, lc string, spec *corev1.LogicalCloudSpec) {
	if err := f.Put(context.Background(), &typesv1.LogicalCloudFacts{Project: project, Name: lc, Level: spec.GetLevel(), Namespace: spec.GetNamespace()}); err != nil {
		c.t.Fatalf("tell the facts of %s/%s: %v", project, lc, err)
	}
}

// Add makes logical cloud lc of project exist at level (kube.LevelStandard,
// ...) with namespace ns (empty for admin), as core stores them resolved.
func (c *Clouds) Add(project, lc, level, ns string) {
	c.AddSpec(project, lc, &corev1.LogicalCloudSpec{Level: level, Namespace: ns})
}

// AddSpec makes logical cloud lc of project exist with spec as given.
func (c *Clouds) AddSpec(project, lc string, spec *corev1.LogicalCloudSpec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.specs[store.Key(project, lc)] = spec
	for _, f := range c.copies {
		c.put(f, project, lc, spec)
	}
}

// Remove makes logical cloud lc of project missing (its facts forgotten).
func (c *Clouds) Remove(project, lc string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.specs, store.Key(project, lc))
	for _, f := range c.copies {
		if err := f.Delete(context.Background(), project, lc); err != nil {
			c.t.Fatalf("forget the facts of %s/%s: %v", project, lc, err)
		}
	}
}

// Spec is what core holds of logical cloud lc of project, as core puts it
// in the requests it sends the services (their internal RPCs take it);
// NotFound, as core answers, for one not added.
func (c *Clouds) Spec(project, lc string) (*corev1.LogicalCloudSpec, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.specs[store.Key(project, lc)]
	if !ok {
		return nil, errs.NotFound("logical cloud %q of project %q not found", lc, project)
	}
	return proto.Clone(got).(*corev1.LogicalCloudSpec), nil
}
