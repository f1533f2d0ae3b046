package rsync_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	k8scorev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/server/servertest"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/rsync/internal/engine"
	"github.com/dcm-project/dcm/services/rsync/internal/rsync"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// serveWithEngine serves the rsync API with its engine running; setup,
// if given, is called on the service before it runs.
func serveWithEngine(t *testing.T, setup ...func(*rsync.Service)) client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	conn := servertest.Serve(t, func(st *store.Store) []server.Service {
		s := rsync.New(st, engine.Config{RetryBase: 100 * time.Millisecond, RetryMax: time.Second}, zap.NewNop())
		for _, f := range setup {
			f(s)
		}
		go func() { done <- s.Run(ctx) }()
		return []server.Service{s}
	})
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return newClient(conn)
}

// registerHarness registers the harness's clusters under provider "edge".
func registerHarness(t *testing.T, c client, h *kubetest.Harness) {
	t.Helper()
	ctx := context.Background()
	_, err := c.CreateClusterProvider(ctx, &rsyncv1.CreateClusterProviderRequest{
		ClusterProvider: &rsyncv1.ClusterProvider{Metadata: &typesv1.Metadata{Name: "edge"}}})
	require.NoError(t, err)
	for _, kc := range h.Clusters {
		_, err := c.CreateCluster(ctx, &rsyncv1.CreateClusterRequest{Provider: "edge", Cluster: &rsyncv1.Cluster{
			Metadata: &typesv1.Metadata{Name: kc.Name}, Spec: &rsyncv1.ClusterSpec{Kubeconfig: string(kc.Kubeconfig)}}})
		require.NoError(t, err)
	}
}

func csr(t *testing.T, name string) string {
	t.Helper()
	req, _, err := kube.NewCSR(name)
	require.NoError(t, err)
	return kube.CSRManifest(name, req, nil)
}

func resources(manifests ...string) []*rsyncv1.Resource {
	out := make([]*rsyncv1.Resource, len(manifests))
	for i, m := range manifests {
		out[i] = &rsyncv1.Resource{Manifest: m}
	}
	return out
}

func TestRolloutAPIOnRealClusters(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	c := serveWithEngine(t)
	registerHarness(t, c, h)
	ctx := context.Background()
	const ns = "api-tenant"
	manifests := []string{
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": %q}}`, ns),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": %q},
 "spec": {"hard": {"configmaps": "5", "requests.cpu": "2"}}}`, ns),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "one", "namespace": %q}}`, ns),
		csr(t, ns+"-user"),
	}
	var clusters []*rsyncv1.ClusterResources
	for _, kc := range h.Clusters {
		clusters = append(clusters, &rsyncv1.ClusterResources{Provider: "edge", Cluster: kc.Name, Resources: resources(manifests...)})
	}

	t.Run("bad input names the field", func(t *testing.T) {
		cases := map[string]struct {
			req   *rsyncv1.SubmitRolloutRequest
			field string
		}{
			"no owner":  {&rsyncv1.SubmitRolloutRequest{Clusters: clusters}, "owner"},
			"bad owner": {&rsyncv1.SubmitRolloutRequest{Owner: "LC/Upper", Clusters: clusters}, "owner"},
			"unregistered cluster": {&rsyncv1.SubmitRolloutRequest{Owner: "lc/p/x", Clusters: []*rsyncv1.ClusterResources{
				{Provider: "edge", Cluster: "nowhere", Resources: resources(manifests[0])}}}, "clusters[0]"},
			"cluster twice": {&rsyncv1.SubmitRolloutRequest{Owner: "lc/p/x", Clusters: []*rsyncv1.ClusterResources{
				clusters[0], clusters[0]}}, "clusters[1]"},
			"not YAML": {&rsyncv1.SubmitRolloutRequest{Owner: "lc/p/x", Clusters: []*rsyncv1.ClusterResources{
				{Provider: "edge", Cluster: "cluster-1", Resources: resources(manifests[0], "{not: [yaml")}}}, "clusters[0].resources[1].manifest"},
			"no kind": {&rsyncv1.SubmitRolloutRequest{Owner: "lc/p/x", Clusters: []*rsyncv1.ClusterResources{
				{Provider: "edge", Cluster: "cluster-1", Resources: resources(`{"apiVersion": "v1", "metadata": {"name": "a"}}`)}}}, "clusters[0].resources[0].manifest"},
			"no name": {&rsyncv1.SubmitRolloutRequest{Owner: "lc/p/x", Clusters: []*rsyncv1.ClusterResources{
				{Provider: "edge", Cluster: "cluster-1", Resources: resources(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}`)}}}, "clusters[0].resources[0].manifest"},
			"two documents": {&rsyncv1.SubmitRolloutRequest{Owner: "lc/p/x", Clusters: []*rsyncv1.ClusterResources{
				{Provider: "edge", Cluster: "cluster-1", Resources: resources("kind: A\n---\nkind: B\n")}}}, "clusters[0].resources[0].manifest"},
			"object twice": {&rsyncv1.SubmitRolloutRequest{Owner: "lc/p/x", Clusters: []*rsyncv1.ClusterResources{
				{Provider: "edge", Cluster: "cluster-1", Resources: resources(manifests[0], manifests[0])}}}, "clusters[0].resources[1].manifest"},
			"resourceVersion": {&rsyncv1.SubmitRolloutRequest{Owner: "lc/p/x", Clusters: []*rsyncv1.ClusterResources{
				{Provider: "edge", Cluster: "cluster-1", Resources: resources(`{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "x", "resourceVersion": "7"}}`)}}}, "clusters[0].resources[0].manifest"},
		}
		for name, tc := range cases {
			_, err := c.SubmitRollout(ctx, tc.req)
			require.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", name, err)
			require.Equal(t, tc.field, errs.FieldOf(status.Convert(err)), "%s: %v", name, err)
		}
		_, err := c.GetRolloutStatus(ctx, &rsyncv1.GetRolloutStatusRequest{Owner: "lc/p/x"})
		require.Equal(t, codes.NotFound, status.Code(err), "nothing was stored")
	})

	r, err := c.SubmitRollout(ctx, &rsyncv1.SubmitRolloutRequest{Owner: "lc/p/api", Clusters: clusters})
	require.NoError(t, err)
	require.EqualValues(t, 1, r.GetGeneration())
	_, err = c.SubmitRollout(ctx, &rsyncv1.SubmitRolloutRequest{Owner: "lc/p/api", Clusters: clusters})
	require.Equal(t, codes.AlreadyExists, status.Code(err))

	// The watch streams until the rollout settles.
	last, updates := settle(t, c, "lc/p/api")
	require.Equal(t, rsyncv1.State_STATE_APPLIED, last.GetState(), "%v", last)
	require.True(t, last.GetSettled())
	require.EqualValues(t, 12, last.GetReady())
	t.Logf("%d status updates until applied", updates)
	// Many at once: the same summary, without the clusters; an owner with
	// no rollout is left out.
	states, err := c.GetRolloutStates(ctx, &rsyncv1.GetRolloutStatesRequest{Owners: []string{"lc/p/none", "lc/p/api"}})
	require.NoError(t, err)
	require.Len(t, states.GetStatuses(), 1)
	want := proto.CloneOf(last)
	want.Clusters = nil
	require.True(t, proto.Equal(want, states.GetStatuses()[0]), "%v\n%v", want, states.GetStatuses()[0])
	_, err = c.GetRolloutStates(ctx, &rsyncv1.GetRolloutStatesRequest{Owners: make([]string, 1001)})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "at most 1,000")

	for _, kc := range h.Clusters {
		cert, err := c.GetCertificate(ctx, &rsyncv1.GetCertificateRequest{Provider: "edge", Cluster: kc.Name, Name: ns + "-user"})
		require.NoError(t, err)
		block, _ := pem.Decode(cert.GetCertificate())
		require.NotNil(t, block)
		x, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		require.NoError(t, x.CheckSignatureFrom(kc.CA.Cert), "issued by %s's signer", kc.Name)

		conn, err := c.GetClusterConnection(ctx, &rsyncv1.GetClusterConnectionRequest{Provider: "edge", Cluster: kc.Name})
		require.NoError(t, err)
		require.Equal(t, kc.Server, conn.GetServer())
		require.Equal(t, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: kc.CA.Cert.Raw})), string(conn.GetCertificateAuthorityData()))

		// The quota controller fills in status.used on its own schedule.
		hard := []*rsyncv1.ResourceQuantity{{Resource: "configmaps", Quantity: "5"}, {Resource: "requests.cpu", Quantity: "2"}}
		used := []*rsyncv1.ResourceQuantity{{Resource: "configmaps", Quantity: "1"}, {Resource: "requests.cpu", Quantity: "0"}}
		var q *rsyncv1.GetResourceQuotaStatusResponse
		deadline := time.Now().Add(time.Minute)
		for {
			q, err = c.GetResourceQuotaStatus(ctx, &rsyncv1.GetResourceQuotaStatusRequest{Provider: "edge", Cluster: kc.Name, Namespace: ns, Name: "q"})
			require.NoError(t, err)
			if proto.Equal(&rsyncv1.GetResourceQuotaStatusResponse{Hard: hard, Used: used}, q) {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s: quota status is not hard %v used %v after a minute: %v", kc.Name, hard, used, q)
			time.Sleep(200 * time.Millisecond)
		}
	}
	_, err = c.GetCertificate(ctx, &rsyncv1.GetCertificateRequest{Provider: "edge", Cluster: "cluster-1", Name: "nobody"})
	require.Equal(t, codes.NotFound, status.Code(err))
	_, err = c.GetClusterConnection(ctx, &rsyncv1.GetClusterConnectionRequest{Provider: "edge", Cluster: "nowhere"})
	require.Equal(t, codes.NotFound, status.Code(err))

	_, err = c.DeleteRollout(ctx, &rsyncv1.DeleteRolloutRequest{Owner: "lc/p/api"})
	require.NoError(t, err)
	last, _ = settle(t, c, "lc/p/api")
	require.Equal(t, rsyncv1.State_STATE_DELETED, last.GetState())
	states, err = c.GetRolloutStates(ctx, &rsyncv1.GetRolloutStatesRequest{Owners: []string{"lc/p/api"}})
	require.NoError(t, err)
	require.Len(t, states.GetStatuses(), 1)
	require.Equal(t, rsyncv1.State_STATE_DELETED, states.GetStatuses()[0].GetState())
	require.True(t, states.GetStatuses()[0].GetDeleting())
}

// settle watches owner's rollout until it settles and returns its last
// status and how many updates came.
func settle(t *testing.T, c client, owner string) (*rsyncv1.RolloutStatus, int) {
	t.Helper()
	stream, err := c.WatchRolloutStatus(context.Background(), &rsyncv1.WatchRolloutStatusRequest{Owner: owner, UntilSettled: true})
	require.NoError(t, err)
	var last *rsyncv1.RolloutStatus
	updates := 0
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return last, updates
		}
		require.NoError(t, err)
		last, updates = msg.GetStatus(), updates+1
	}
}

// TestServiceAccountTokenOnRealClusters applies a ServiceAccount, as the
// user service renders a token user, and asks each cluster's TokenRequest
// API for tokens of it: tokens the cluster authenticates as that
// ServiceAccount, that expire when asked.
func TestServiceAccountTokenOnRealClusters(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	c := serveWithEngine(t)
	registerHarness(t, c, h)
	ctx := context.Background()
	const ns, sa = "token-tenant", "robot"
	labels := `{"dcm.io/project": "p", "dcm.io/logical-cloud": "token"}`
	manifests := []string{
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": %q, "labels": %s}}`, ns, labels),
		fmt.Sprintf(`{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": %q, "namespace": %q, "labels": %s}}`, sa, ns, labels),
	}
	var clusters []*rsyncv1.ClusterResources
	for _, kc := range h.Clusters {
		clusters = append(clusters, &rsyncv1.ClusterResources{Provider: "edge", Cluster: kc.Name, Resources: resources(manifests...)})
	}
	_, err := c.SubmitRollout(ctx, &rsyncv1.SubmitRolloutRequest{Owner: "lc/p/token", Clusters: clusters})
	require.NoError(t, err)
	last, _ := settle(t, c, "lc/p/token")
	require.Equal(t, rsyncv1.State_STATE_APPLIED, last.GetState(), "%v", last)

	for _, kc := range h.Clusters {
		conn, err := c.GetClusterConnection(ctx, &rsyncv1.GetClusterConnectionRequest{Provider: "edge", Cluster: kc.Name})
		require.NoError(t, err)
		for _, tc := range []struct {
			seconds int64
			want    time.Duration
		}{{0, 24 * time.Hour}, {600, 10 * time.Minute}, {3600, time.Hour}, {2592000, 30 * 24 * time.Hour}} {
			asked := time.Now()
			r, err := c.GetServiceAccountToken(ctx, &rsyncv1.GetServiceAccountTokenRequest{
				Provider: "edge", Cluster: kc.Name, Namespace: ns, ServiceAccount: sa, ExpirationSeconds: tc.seconds})
			require.NoError(t, err, "%s: %d s", kc.Name, tc.seconds)
			exp := jwtExpiry(t, r.GetToken())
			require.Equal(t, r.GetExpireTime().AsTime().Unix(), exp.Unix(), "the answered expiry is the token's")
			require.WithinDuration(t, asked.Add(tc.want), exp, time.Minute, "%s: a token asked for %d s", kc.Name, tc.seconds)
			require.Equal(t, "system:serviceaccount:"+ns+":"+sa, whoAmI(t, conn, r.GetToken()), kc.Name)
		}
	}

	// A ServiceAccount DCM did not apply gets no token.
	cs := kubeClient(t, h.Clusters[0])
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &k8scorev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cases := map[string]struct {
		req   *rsyncv1.GetServiceAccountTokenRequest
		code  codes.Code
		field string
	}{
		"too short": {&rsyncv1.GetServiceAccountTokenRequest{Provider: "edge", Cluster: "cluster-1", Namespace: ns, ServiceAccount: sa, ExpirationSeconds: 599},
			codes.InvalidArgument, "expirationSeconds"},
		"too long": {&rsyncv1.GetServiceAccountTokenRequest{Provider: "edge", Cluster: "cluster-1", Namespace: ns, ServiceAccount: sa, ExpirationSeconds: 2592001},
			codes.InvalidArgument, "expirationSeconds"},
		"negative": {&rsyncv1.GetServiceAccountTokenRequest{Provider: "edge", Cluster: "cluster-1", Namespace: ns, ServiceAccount: sa, ExpirationSeconds: -1},
			codes.InvalidArgument, "expirationSeconds"},
		"no service account": {&rsyncv1.GetServiceAccountTokenRequest{Provider: "edge", Cluster: "cluster-1", Namespace: ns},
			codes.InvalidArgument, "serviceAccount"},
		"no namespace": {&rsyncv1.GetServiceAccountTokenRequest{Provider: "edge", Cluster: "cluster-1", ServiceAccount: sa},
			codes.InvalidArgument, "namespace"},
		"missing": {&rsyncv1.GetServiceAccountTokenRequest{Provider: "edge", Cluster: "cluster-1", Namespace: ns, ServiceAccount: "nobody"},
			codes.NotFound, ""},
		"not DCM's": {&rsyncv1.GetServiceAccountTokenRequest{Provider: "edge", Cluster: "cluster-1", Namespace: ns, ServiceAccount: "by-hand"},
			codes.FailedPrecondition, ""},
		"unregistered cluster": {&rsyncv1.GetServiceAccountTokenRequest{Provider: "edge", Cluster: "nowhere", Namespace: ns, ServiceAccount: sa},
			codes.NotFound, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := c.GetServiceAccountToken(ctx, tc.req)
			require.Equal(t, tc.code, status.Code(err), "%v", err)
			require.Empty(t, r.GetToken())
			require.Equal(t, tc.field, errs.FieldOf(status.Convert(err)), "%v", err)
		})
	}

	_, err = c.DeleteRollout(ctx, &rsyncv1.DeleteRolloutRequest{Owner: "lc/p/token"})
	require.NoError(t, err)
	last, _ = settle(t, c, "lc/p/token")
	require.Equal(t, rsyncv1.State_STATE_DELETED, last.GetState())
}

// jwtExpiry reads the exp claim of a JWT (unverified: the cluster checks
// the signature, whoAmI shows it accepts the token).
func jwtExpiry(t *testing.T, token []byte) time.Time {
	t.Helper()
	parts := strings.Split(string(token), ".")
	require.Len(t, parts, 3, "a JWT")
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var claims struct {
		Exp int64 `json:"exp"`
	}
	require.NoError(t, json.Unmarshal(payload, &claims))
	require.NotZero(t, claims.Exp)
	return time.Unix(claims.Exp, 0)
}

// kubeClient is an admin client of a harness cluster.
func kubeClient(t *testing.T, kc *kubetest.Cluster) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kc.Kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

// whoAmI asks a cluster who token authenticates as (a SelfSubjectReview).
func whoAmI(t *testing.T, conn *rsyncv1.GetClusterConnectionResponse, token []byte) string {
	t.Helper()
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(conn.GetCertificateAuthorityData()))
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: conn.GetTlsServerName(), MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequest(http.MethodPost, conn.GetServer()+"/apis/authentication.k8s.io/v1/selfsubjectreviews",
		strings.NewReader(`{"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusCreated, resp.StatusCode, "the cluster accepts the token")
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&review))
	return review.Status.UserInfo.Username
}
