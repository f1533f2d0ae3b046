package engine

import (
	"context"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dcm-project/dcm/platform/errs"
)

// Simulated is an in-process stand-in for a cluster, for benchmarks: it
// keeps objects in a map, delays every call by Latency and fails a share
// FailureRate of them with a retryable error. A CSR is issued as soon as
// it is approved. It checks nothing a real API server would (field
// managers, conflicts, preconditions).
type Simulated struct {
	Latency     time.Duration
	FailureRate float64
	// Calls counts the calls made.
	Calls atomic.Int64

	mu      sync.Mutex
	version int
	objects map[string]*unstructured.Unstructured
}

// errSimulated is the failure Simulated injects, like a dropped connection.
var errSimulated = errors.New("simulated network failure")

func (s *Simulated) call(ctx context.Context) error {
	s.Calls.Add(1)
	if s.Latency > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.Latency):
		}
	}
	if s.FailureRate > 0 && rand.Float64() < s.FailureRate {
		return errSimulated
	}
	return nil
}

func (s *Simulated) key(gvk schema.GroupVersionKind, namespace, name string) string {
	return keyOf(gvk.GroupVersion().String(), gvk.Kind, namespace, name)
}

// Apply implements Cluster.
func (s *Simulated) Apply(ctx context.Context, obj *unstructured.Unstructured, _ string, _ bool) (*unstructured.Unstructured, error) {
	if err := s.call(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objects == nil {
		s.objects = map[string]*unstructured.Unstructured{}
	}
	k := s.key(obj.GroupVersionKind(), obj.GetNamespace(), obj.GetName())
	stored := obj.DeepCopy()
	if cur, ok := s.objects[k]; ok {
		if st, ok := cur.Object["status"]; ok {
			stored.Object["status"] = st
		}
	}
	s.version++
	stored.SetResourceVersion(strconv.Itoa(s.version))
	s.objects[k] = stored
	return stored.DeepCopy(), nil
}

// Get implements Cluster.
func (s *Simulated) Get(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	if err := s.call(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok := s.objects[s.key(gvk, namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, name)
	}
	return obj.DeepCopy(), nil
}

// Delete implements Cluster.
func (s *Simulated) Delete(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string, _ types.UID) error {
	if err := s.call(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, s.key(gvk, namespace, name))
	return nil
}

// ApproveCSR implements Cluster: the certificate is issued at once.
func (s *Simulated) ApproveCSR(ctx context.Context, csr *unstructured.Unstructured, _ string) error {
	if err := s.call(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.key(csr.GroupVersionKind(), "", csr.GetName())
	cur, ok := s.objects[k]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}, csr.GetName())
	}
	approved := withApproval(cur)
	_ = unstructured.SetNestedField(approved.Object, base64.StdEncoding.EncodeToString([]byte("simulated certificate")), "status", "certificate")
	s.objects[k] = approved
	return nil
}

// Objects counts the objects the cluster holds.
func (s *Simulated) Objects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objects)
}

// Clusters is a Connector of a fixed set of clusters by "provider/cluster"
// (benchmarks and tests).
type Clusters[C Cluster] map[string]C

// SimulatedClusters is a Connector of Simulated clusters.
type SimulatedClusters = Clusters[*Simulated]

// Known implements Connector.
func (m Clusters[C]) Known(_ context.Context, provider, cluster string) error {
	if _, ok := m[clusterKey(provider, cluster)]; !ok {
		return errs.NotFound("cluster %s not found", clusterKey(provider, cluster))
	}
	return nil
}

// Connect implements Connector.
func (m Clusters[C]) Connect(ctx context.Context, provider, cluster string) (Cluster, error) {
	if err := m.Known(ctx, provider, cluster); err != nil {
		return nil, Terminal(err)
	}
	return m[clusterKey(provider, cluster)], nil
}
