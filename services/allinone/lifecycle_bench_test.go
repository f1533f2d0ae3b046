package allinone_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
)

// BenchmarkApplyToUsableKubeconfigs measures, on 3 real clusters, the
// time from POST .../apply until the logical cloud's user can work on every
// cluster: each cluster's kubeconfig can be read and lists configmaps in
// the namespace. Each run applies a new logical cloud (terminated and
// deleted off the clock). It reports the median as p50-ms; run it with
// -benchtime 10x (make bench-lifecycle).
func BenchmarkApplyToUsableKubeconfigs(b *testing.B) {
	r, h := onHarness(b, "bench")
	ctx := context.Background()
	var took []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		name := fmt.Sprintf("lc-%d", i)
		lc := "/v2/projects/bench/logical-clouds/" + name
		r.Want(201, "POST", "/v2/projects/bench/logical-clouds", `{"metadata":{"name":"`+name+`"},"spec":{"user":{"user-name":"u",
		  "user-permissions":[{"permission-name":"cm","apiGroups":[""],"resources":["configmaps"],"verbs":["list"]}]}}}`)
		for _, c := range h.Clusters {
			r.Want(201, "POST", lc+"/cluster-references", `{"cluster-provider":"edge","cluster-name":"`+c.Name+`"}`)
		}
		b.StartTimer()
		start := time.Now()
		r.Want(202, "POST", lc+"/apply", "")
		for _, c := range h.Clusters {
			for {
				code, kc := apitest.Call(b, r.C, "GET", r.Base+lc+"/cluster-references/"+c.Name+"/kubeconfig", "")
				if code == 200 {
					cs, ns := clientFor(b, kc)
					if _, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err == nil {
						break
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		r.Want(202, "POST", lc+"/terminate", "")
		r.Settle(lc, "Terminated")
		r.Want(204, "DELETE", lc, "")
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
	b.Logf("apply to usable kubeconfigs on %d clusters, %d runs: %v", len(h.Clusters), len(took), took)
}
