package engine_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/store/storetest"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
)

// secretManifest is a Secret in ns whose ca-key.pem holds key.
func secretManifest(ns, key string) string {
	return fmt.Sprintf(`{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cacerts", "namespace": %q},
 "data": {"ca-key.pem": %q, "ca-cert.pem": %q}}`, ns, base64.StdEncoding.EncodeToString([]byte(key)),
		base64.StdEncoding.EncodeToString([]byte("a public certificate")))
}

// rawRecords is every record of rsync's rollout collections as the store
// holds them, read with the MongoDB driver.
func rawRecords(t *testing.T, st *store.Store) string {
	t.Helper()
	var b strings.Builder
	for _, coll := range []string{"rollouts", "rollout_clusters"} {
		cur, err := st.Database().Collection(coll).Find(context.Background(), bson.D{})
		require.NoError(t, err)
		var docs []bson.Raw
		require.NoError(t, cur.All(context.Background(), &docs))
		require.NotEmpty(t, docs, coll)
		for _, d := range docs {
			b.WriteString(d.String())
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// requireNoKey fails if text shows key in any spelling a record, a status
// or a log could use.
func requireNoKey(t *testing.T, what, text, key string) {
	t.Helper()
	for _, s := range []string{key, base64.StdEncoding.EncodeToString([]byte(key))} {
		require.NotContains(t, text, s, "%s holds the sensitive manifest's key material", what)
	}
}

// TestSensitiveResourceOnRealCluster: a sensitive Secret (a CA key) is
// applied as given, while rsync's records hold only its hash (the manifest
// sealed), its status only kind and name, and after a restart the engine
// opens it again; an update that drops it leaves nothing sealed behind.
func TestSensitiveResourceOnRealCluster(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	st := storetest.Open(t)
	conn := newKubeClusters(h)
	ctx := context.Background()
	const ns, owner = "sealed-a", "lc/p/sealed"
	key := fmt.Sprintf("-----BEGIN PRIVATE KEY----- test key %d", time.Now().UnixNano())
	nsManifest := fmt.Sprintf(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": %q}}`, ns)
	cm := fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain", "namespace": %q}, "data": {"k": "v"}}`, ns)
	clusters := func(sensitive ...string) []*rsyncv1.ClusterResources {
		cr := &rsyncv1.ClusterResources{Provider: "edge", Cluster: h.Clusters[0].Name,
			Resources: []*rsyncv1.Resource{{Manifest: nsManifest}, {Manifest: cm}}}
		for _, m := range sensitive {
			cr.Resources = append(cr.Resources, &rsyncv1.Resource{Manifest: m, Sensitive: true})
		}
		return []*rsyncv1.ClusterResources{cr}
	}

	// A first engine, stopped below as a restart would.
	e1 := engine.New(st, conn, testConfig, zap.NewNop())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e1.Run(runCtx) }()
	_, err := e1.Submit(ctx, owner, clusters(secretManifest(ns, key)))
	require.NoError(t, err)
	applied := waitFor(t, e1, owner, "applied", settledIn(rsyncv1.State_STATE_APPLIED))
	require.EqualValues(t, 3, applied.GetTotal())

	cs := clientset(t, h.Clusters[0])
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "cacerts", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, key, string(sec.Data["ca-key.pem"]), "applied as given")
	require.Equal(t, owner, sec.GetAnnotations()[engine.OwnerAnnotation])

	js, err := protojson.Marshal(applied)
	require.NoError(t, err)
	requireNoKey(t, "the status", string(js), key)
	require.Contains(t, string(js), `"kind":"Secret"`)
	requireNoKey(t, "the raw store records", rawRecords(t, st), key)
	require.Contains(t, rawRecords(t, st), "sha256:", "the record keeps the manifest's hash")

	// Bad sensitive input is refused without quoting it.
	_, err = e1.Update(ctx, owner, clusters(`{"apiVersion": "v1", "kind": "Secret", "data": {"ca-key.pem": "`+key+`"`))
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	requireNoKey(t, "the error", err.Error(), key)
	require.Contains(t, err.Error(), "clusters[0].resources[2].manifest")

	stop()
	require.NoError(t, <-done)

	// The restarted engine opens the sealed manifest: an update that keeps
	// it unchanged does not apply it again, and it is still on the cluster.
	e2 := runEngine(t, st, conn)
	cm = strings.Replace(cm, `"k": "v"`, `"k": "w"`, 1)
	before := conn.totalApplies()
	_, err = e2.Update(ctx, owner, clusters(secretManifest(ns, key)))
	require.NoError(t, err)
	waitFor(t, e2, owner, "updated", func(s *rsyncv1.RolloutStatus) bool {
		return s.GetGeneration() == 2 && settledIn(rsyncv1.State_STATE_APPLIED)(s)
	})
	require.Equal(t, 1, conn.totalApplies()-before, "only the changed ConfigMap is applied: the reopened Secret has the same hash")
	sec, err = cs.CoreV1().Secrets(ns).Get(ctx, "cacerts", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, key, string(sec.Data["ca-key.pem"]))

	// Dropped: deleted from the cluster, and the record's sealed list is
	// empty (nothing of it is kept, sealed or not).
	_, err = e2.Update(ctx, owner, clusters())
	require.NoError(t, err)
	waitFor(t, e2, owner, "dropped", func(s *rsyncv1.RolloutStatus) bool {
		return s.GetGeneration() == 3 && settledIn(rsyncv1.State_STATE_APPLIED)(s)
	})
	_, err = cs.CoreV1().Secrets(ns).Get(ctx, "cacerts", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "dropped sensitive Secret deleted: %v", err)
	requireNoKey(t, "the raw store records", rawRecords(t, st), key)

	_, err = e2.Delete(ctx, owner)
	require.NoError(t, err)
	waitFor(t, e2, owner, "deleted", settledIn(rsyncv1.State_STATE_DELETED))
}
