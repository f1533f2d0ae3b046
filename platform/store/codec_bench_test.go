package store

import (
	"testing"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
)

func benchCloud() *corev1.LogicalCloud {
	return &corev1.LogicalCloud{
		Metadata: &typesv1.Metadata{Name: "lc-00001", Description: "benchmark"},
		Spec: &corev1.LogicalCloudSpec{Namespace: "lc-00001", Level: "standard", PodSecurity: "baseline",
			User: &corev1.LogicalCloudUser{UserName: "user-1", Type: "certificate"}},
		Lifecycle: &corev1.Lifecycle{Phase: "created"},
	}
}

// BenchmarkFromBSON reads a logical cloud's body the plain way (relaxed
// extended JSON read by protojson), BenchmarkDecodeBody directly
// (codec.go).
func BenchmarkFromBSON(b *testing.B) {
	raw, err := toBSON(benchCloud())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for range b.N {
		if err := fromBSON(raw, new(corev1.LogicalCloud)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeBody(b *testing.B) {
	raw, err := toBSON(benchCloud())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for range b.N {
		if err := decodeBody(raw, new(corev1.LogicalCloud)); err != nil {
			b.Fatal(err)
		}
	}
}
