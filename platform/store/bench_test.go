package store_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

// BenchmarkUpdateByID updates one record by id in a collection of n
// records: what a per-cluster status write costs as clusters grow.
func BenchmarkUpdateByID(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			st := storetest.Open(b)
			recs := store.NewRecords(st, "bench", "record", func() *rsyncv1.StoredClusterState { return &rsyncv1.StoredClusterState{} })
			ctx := context.Background()
			msg := clusterState()
			for i := range n {
				msg.Cluster = fmt.Sprint(i)
				if err := recs.Create(ctx, fmt.Sprint(i), "o", msg); err != nil {
					b.Fatal(err)
				}
			}
			version := int64(1)
			b.ResetTimer()
			for range b.N {
				if err := recs.Update(ctx, "7", version, msg); err != nil {
					b.Fatal(err)
				}
				version++
			}
		})
	}
}

// BenchmarkGetByID reads one record by id in a collection of n records.
func BenchmarkGetByID(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			st := storetest.Open(b)
			recs := store.NewRecords(st, "bench", "record", func() *rsyncv1.StoredClusterState { return &rsyncv1.StoredClusterState{} })
			ctx := context.Background()
			msg := clusterState()
			for i := range n {
				if err := recs.Create(ctx, fmt.Sprint(i), "o", msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				if _, err := recs.Get(ctx, "7"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// clusterState is a record the size of an 8-resource rollout cluster state.
func clusterState() *rsyncv1.StoredClusterState {
	msg := &rsyncv1.StoredClusterState{Owner: "o", Provider: "p"}
	for range 8 {
		msg.Resources = append(msg.Resources, &rsyncv1.ResourceStatus{ApiVersion: "v1", Kind: "ConfigMap", Namespace: "ns",
			Name: "a-fairly-long-name", ManifestHash: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"})
	}
	return msg
}

// BenchmarkSaveAsInsert saves one record as rsync saves a cluster state
// (a new record inserted, the previous one deleted by id) in a collection
// of n records: the key lookups that replace BenchmarkUpdateByID's scan.
func BenchmarkSaveAsInsert(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			st := storetest.Open(b)
			recs := store.NewRecords(st, "bench", "record", func() *rsyncv1.StoredClusterState { return &rsyncv1.StoredClusterState{} })
			ctx := context.Background()
			msg := clusterState()
			for i := range n {
				msg.Cluster = fmt.Sprint(i)
				if err := recs.Create(ctx, fmt.Sprintf("%d#1", i), "o", msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				if err := recs.Create(ctx, fmt.Sprintf("7#%d", i+2), "o", msg); err != nil {
					b.Fatal(err)
				}
				if err := recs.Delete(ctx, fmt.Sprintf("7#%d", i+1)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkListPage reads a page of 1,000 logical clouds, all of a
// collection of 1,000: what a list of them costs at the store, and with
// the collection's reads kept in memory (CacheReads: the change mark's
// keyed read and the copies).
func BenchmarkListPage(b *testing.B) {
	for _, coll := range []string{"bench_lcs", benchCachedLCs} {
		b.Run("collection="+coll, func(b *testing.B) {
			st := storetest.Open(b)
			recs := store.NewRecords(st, coll, "logical cloud", func() *corev1.LogicalCloud { return &corev1.LogicalCloud{} })
			ctx := context.Background()
			for i := range 1000 {
				lc := &corev1.LogicalCloud{
					Metadata: &typesv1.Metadata{Name: fmt.Sprintf("lc-%05d", i), Description: "benchmark"},
					Spec: &corev1.LogicalCloudSpec{Namespace: fmt.Sprintf("lc-%05d", i), Level: "standard", PodSecurity: "baseline",
						User: &corev1.LogicalCloudUser{UserName: "user-1", Type: "certificate"}},
					Lifecycle: &corev1.Lifecycle{Phase: "created", Changed: timestamppb.Now()},
				}
				if err := recs.Create(ctx, store.Key("p", lc.Metadata.Name), "p", lc); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				out, _, err := recs.ListPage(ctx, "p", store.PageRequest{Size: 1000})
				if err != nil || len(out) != 1000 {
					b.Fatal(err, len(out))
				}
			}
		})
	}
}

// benchCachedLCs is BenchmarkListPage's collection kept in memory.
const benchCachedLCs = "bench_lcs_cached"

func init() { store.CacheReads(benchCachedLCs, benchCachedLCs+"_marks") }
