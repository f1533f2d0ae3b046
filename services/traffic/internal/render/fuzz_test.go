package render_test

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/services/traffic/internal/render"
)

// FuzzRender: whatever intents a group holds, Render answers objects or
// an InvalidArgument or FailedPrecondition error, never a panic or
// another code, and the same input twice gives the same answer. The
// fuzzer's bytes are a connectivity intent used as every kind at once.
func FuzzRender(f *testing.F) {
	for _, file := range []string{"intracluster.json", "outbound.json", "inbound.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", "seed", file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, []byte(`{"inboundservicename":"sleep01","port":80,"clientServices":[{"clientServiceName":"a","egressgateway":true}]}`))
	}
	f.Fuzz(func(t *testing.T, conn, inter []byte) {
		c := &trafficv1.ConnectivityIntent{}
		ic := &trafficv1.InterclusterIntent{}
		if protojson.Unmarshal(conn, c) != nil || protojson.Unmarshal(inter, ic) != nil {
			return
		}
		in := input()
		in.Intercluster = []*trafficv1.InterclusterIntent{ic}
		in.Intracluster = []*trafficv1.ConnectivityIntent{c}
		in.Outbound = []*trafficv1.ConnectivityIntent{c}
		in.Inbound = []*trafficv1.ConnectivityIntent{c}
		out, runs, err := render.Render(in)
		if err != nil {
			if code := errs.Code(err); code != codes.InvalidArgument && code != codes.FailedPrecondition {
				t.Fatalf("code %s: %v", code, err)
			}
			return
		}
		again, runs2, err := render.Render(in)
		if err != nil || len(again) != len(out) || len(runs2) != len(runs) {
			t.Fatalf("second render differs: %v", err)
		}
		for i := range out {
			for j := range out[i].Manifests {
				if out[i].Manifests[j] != again[i].Manifests[j] {
					t.Fatalf("manifest %d of %s differs", j, out[i].Cluster)
				}
			}
		}
	})
}
