package dns

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	trafficv1 "github.com/dcm-project/dcm/gen/dcm/traffic/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/kubetest/bindtest"
	"github.com/dcm-project/dcm/platform/store/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

var crds = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRD installs external-dns's DNSEndpoint CRD, read from the module
// this package links, and waits until DNSEndpoints can be listed.
func installCRD(ctx context.Context, t *testing.T, rc *rest.Config) {
	t.Helper()
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/external-dns").Output()
	require.NoError(t, err, "locate the external-dns module")
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard", "dnsendpoints.externaldns.k8s.io.yaml"))
	require.NoError(t, err)
	obj := map[string]any{}
	require.NoError(t, yaml.Unmarshal(b, &obj))
	dc, err := dynamic.NewForConfig(rc)
	require.NoError(t, err)
	_, err = dc.Resource(crds).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) { // another test of this binary installed it on the shared cluster
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		_, err := dc.Resource(dnsEndpoints).List(ctx, metav1.ListOptions{})
		return err == nil
	}, time.Minute, 200*time.Millisecond, "DNSEndpoint CRD not served")
}

// publish creates a DNSEndpoint with an A record (or replaces its target).
func publish(ctx context.Context, t *testing.T, rc *rest.Config, ns, name, dnsName, addr string, lbls map[string]string) {
	t.Helper()
	dc, err := dynamic.NewForConfig(rc)
	require.NoError(t, err)
	l := map[string]any{}
	for k, v := range lbls {
		l[k] = v
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "externaldns.k8s.io/v1alpha1", "kind": "DNSEndpoint",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": l},
		"spec": map[string]any{"endpoints": []any{map[string]any{
			"dnsName": dnsName, "recordType": "A", "recordTTL": int64(60), "targets": []any{addr}}}},
	}}
	_, err = dc.Resource(dnsEndpoints).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(t, err)
}

func ensureNamespace(ctx context.Context, t *testing.T, rc *rest.Config, ns string) {
	t.Helper()
	dc, err := dynamic.NewForConfig(rc)
	require.NoError(t, err)
	_, err = dc.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx,
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// eventuallyAnswers waits until dig answers want (sorted) for name: BIND
// applies an update before it answers it, but the check must not be the
// one place a slow machine makes a test flaky.
func eventuallyAnswers(t *testing.T, b *bindtest.Server, name string, want []string) {
	t.Helper()
	var got []string
	require.Eventually(t, func() bool {
		got = b.Lookup(t, name, "A")
		slices.Sort(got)
		return slices.Equal(got, want)
	}, 10*time.Second, 100*time.Millisecond, "dig %s A: want %v", name, want)
}

func bindParams(b *bindtest.Server) map[string]string {
	return map[string]string{"rfc2136-host": b.Addr, "rfc2136-port": fmt.Sprint(b.Port),
		"rfc2136-zone": b.Zone, "rfc2136-tsig-keyname": b.KeyName}
}

// TestRoundTrip publishes a name from real clusters' DNSEndpoints into a
// real BIND, read back with dig: one cluster, then two (both addresses),
// then released (nothing), with a run whose cluster is unreachable left
// alone in between.
func TestRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("needs real clusters and BIND; skipped with -short")
	}
	b := bindtest.Start(t)
	h := kubetest.ForTests(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	configs := map[string]*rest.Config{}
	for _, c := range h.Clusters {
		rc, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
		require.NoError(t, err)
		configs["edge/"+c.Name] = rc
		installCRD(ctx, t, rc)
		ensureNamespace(ctx, t, rc, "dns-app")
	}
	connect := func(_ context.Context, cl Cluster) (*rest.Config, error) {
		if rc, ok := configs[cl.Provider+"/"+cl.Cluster]; ok {
			return rc, nil
		}
		return nil, fmt.Errorf("cluster %s/%s is unreachable", cl.Provider, cl.Cluster)
	}
	st := storetest.Open(t)
	c := New(st, connect, zapNop(), time.Minute)
	noBackoff(c)
	allow(t, c, fmt.Sprintf("%s:%d", b.Addr, b.Port))
	c1, c2 := h.Clusters[0].Name, h.Clusters[1].Name
	sel := map[string]string{"dcm.traffic/run": "g1-dns-ms1"}
	name := "service1." + b.Zone
	run := Run{Intent: "dns", ID: "ms1", ExternalName: name, Provider: "rfc2136", Params: bindParams(b),
		Credentials: map[string]string{"rfc2136-tsig-secret": b.Secret},
		Clusters:    []Cluster{{"edge", c1, "dns-app", "reader"}}, Selector: sel}

	// Another run's DNSEndpoint on the same cluster, other labels: not ours.
	publish(ctx, t, configs["edge/"+c1], "dns-app", "other", name, "198.51.100.1", map[string]string{"dcm.traffic/run": "other"})
	publish(ctx, t, configs["edge/"+c1], "dns-app", "ms1", name, "192.0.2.10", sel)

	t.Run("one cluster", func(t *testing.T) {
		require.NoError(t, c.Set(ctx, "p/lc/g1", []Run{run}))
		require.NoError(t, c.SyncOnce(ctx))
		eventuallyAnswers(t, b, name, []string{"192.0.2.10"})
		s, err := c.Status(ctx, "p/lc/g1")
		require.NoError(t, err)
		require.Len(t, s, 1)
		require.Equal(t, "active", s[0].GetState())
		require.Empty(t, s[0].GetLastError())
		require.NotNil(t, s[0].GetLastSync())
		require.Equal(t, []string{name + " A 192.0.2.10"}, s[0].GetRecords())
		require.Equal(t, []string{"edge/" + c1}, s[0].GetClusters())
		// The TXT registry's ownership record (external-dns's "a-" name).
		txt := b.Lookup(t, "a-"+name, "TXT")
		require.Len(t, txt, 1)
		require.Contains(t, txt[0], "external-dns/owner="+(&stored{Group: "p/lc/g1", Intent: "dns", ID: "ms1"}).ownerID())
	})

	t.Run("two clusters", func(t *testing.T) {
		publish(ctx, t, configs["edge/"+c2], "dns-app", "ms1", name, "192.0.2.20", sel)
		run.Clusters = []Cluster{{"edge", c1, "dns-app", "reader"}, {"edge", c2, "dns-app", "reader"}}
		require.NoError(t, c.Set(ctx, "p/lc/g1", []Run{run}))
		require.NoError(t, c.SyncOnce(ctx))
		eventuallyAnswers(t, b, name, []string{"192.0.2.10", "192.0.2.20"})
	})

	t.Run("unreachable cluster keeps the records", func(t *testing.T) {
		broken := run
		broken.Clusters = []Cluster{{"edge", c1, "dns-app", "reader"}, {"edge", "gone", "dns-app", "reader"}}
		require.NoError(t, c.Set(ctx, "p/lc/g1", []Run{broken}))
		require.NoError(t, c.SyncOnce(ctx))
		s, err := c.Status(ctx, "p/lc/g1")
		require.NoError(t, err)
		require.Equal(t, "cluster edge/gone could not be reached", s[0].GetLastError())
		// Still both: the unreachable cluster's address was not dropped.
		eventuallyAnswers(t, b, name, []string{"192.0.2.10", "192.0.2.20"})
		require.NoError(t, c.Set(ctx, "p/lc/g1", []Run{run}))
		require.NoError(t, c.SyncOnce(ctx))
		s, err = c.Status(ctx, "p/lc/g1")
		require.NoError(t, err)
		require.Empty(t, s[0].GetLastError(), "a good pass clears the error")
	})

	t.Run("release", func(t *testing.T) {
		require.NoError(t, c.Release(ctx, "p/lc/g1"))
		s, err := c.Status(ctx, "p/lc/g1")
		require.NoError(t, err)
		require.Equal(t, "releasing", s[0].GetState())
		require.NoError(t, c.SyncOnce(ctx))
		eventuallyAnswers(t, b, name, nil)
		require.Empty(t, b.Lookup(t, "a-"+name, "TXT"), "ownership records deleted too")
		s, err = c.Status(ctx, "p/lc/g1")
		require.NoError(t, err)
		require.Empty(t, s, "the released run's record is gone")
	})
}

// TestOwnerIDCannotBeTaken is issue 29's finding 5 as a tenant sends it,
// on a real cluster and a real BIND whose zone the operator let both
// projects use: project b reads project a's owner id from a's public TXT
// record and gives it as its run's txt-owner-id, to overwrite a's record
// with its own address and then, released, delete it. The owner id is
// now derived from the run's project, group, intent and id only: the run
// giving another is refused (400 naming the parameter), and b's run with
// its own derived id leaves a's record alone, overwritten neither by its
// passes nor deleted by its release.
func TestOwnerIDCannotBeTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real cluster and BIND; skipped with -short")
	}
	b := bindtest.Start(t)
	h := kubetest.ForTests(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rc, err := clientcmd.RESTConfigFromKubeConfig(h.Clusters[0].Kubeconfig)
	require.NoError(t, err)
	installCRD(ctx, t, rc)
	ensureNamespace(ctx, t, rc, "owner-a")
	ensureNamespace(ctx, t, rc, "owner-b")
	connect := func(context.Context, Cluster) (*rest.Config, error) { return rc, nil }
	c := New(storetest.Open(t), connect, zapNop(), time.Minute)
	noBackoff(c)
	server := fmt.Sprintf("%s:%d", b.Addr, b.Port)
	for _, p := range []string{"a", "b"} {
		_, err := c.allow.Put(ctx, "", p, &trafficv1.DnsAllowList{Servers: []string{server}, Zones: []string{b.Zone}})
		require.NoError(t, err)
	}
	name := "shop." + b.Zone
	cl := h.Clusters[0].Name
	run := func(ns, project string) Run {
		return Run{Intent: "dns", ID: "web", ExternalName: name, Provider: "rfc2136", Params: bindParams(b),
			Credentials: map[string]string{"rfc2136-tsig-secret": b.Secret},
			Clusters:    []Cluster{{"edge", cl, ns, "reader"}}, Selector: map[string]string{"dcm.traffic/run": project}}
	}
	publish(ctx, t, rc, "owner-a", "web", name, "192.0.2.10", map[string]string{"dcm.traffic/run": "a"})
	publish(ctx, t, rc, "owner-b", "web", name, "203.0.113.66", map[string]string{"dcm.traffic/run": "b"})

	require.NoError(t, c.Set(ctx, "a/app/v1/shop", []Run{run("owner-a", "a")}))
	require.NoError(t, c.SyncOnce(ctx))
	eventuallyAnswers(t, b, name, []string{"192.0.2.10"})
	txt := b.Lookup(t, "a-"+name, "TXT")
	require.Len(t, txt, 1)
	_, owner, ok := strings.Cut(strings.Trim(txt[0], `"`), "external-dns/owner=")
	require.True(t, ok, "a's TXT record names its owner: %s", txt[0])
	owner, _, _ = strings.Cut(owner, ",")
	t.Logf("project a's owner id, read from its public TXT record: %s", owner)

	// The attacker's run: a's owner id as its txt-owner-id.
	attack := run("owner-b", "b")
	attack.Params["txt-owner-id"] = owner
	err = c.Set(ctx, "b/app/v1/steal", []Run{attack})
	t.Logf("b's run with a's owner id: %v", err)
	require.Equal(t, codes.InvalidArgument, errs.Code(err), "a run naming another's owner id is refused")
	require.Contains(t, err.Error(), "runs[0].externalDnsParameters.txt-owner-id")
	require.NoError(t, c.SyncOnce(ctx))
	eventuallyAnswers(t, b, name, []string{"192.0.2.10"})

	// Its own (derived) owner id: a's record is another owner's, so b's
	// passes neither overwrite it nor, released, delete it.
	require.NoError(t, c.Set(ctx, "b/app/v1/steal", []Run{run("owner-b", "b")}))
	require.NoError(t, c.SyncOnce(ctx))
	require.NoError(t, c.SyncOnce(ctx))
	eventuallyAnswers(t, b, name, []string{"192.0.2.10"})
	require.NoError(t, c.Release(ctx, "b/app/v1/steal"))
	require.NoError(t, c.SyncOnce(ctx))
	s, err := c.Status(ctx, "b/app/v1/steal")
	require.NoError(t, err)
	require.Empty(t, s, "b's run is released")
	eventuallyAnswers(t, b, name, []string{"192.0.2.10"})
	require.Len(t, b.Lookup(t, "a-"+name, "TXT"), 1, "a's ownership record stays")
}
