package allinone_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// istioCRDs lists the CRDs a mesh needs on the cluster (Istio's, group
// *.istio.io, and external-dns's DNSEndpoint for the traffic controller)
// by name, with their dcm.io/owner annotation.
func istioCRDs(t testing.TB, c *kubetest.Cluster) map[string]string {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	list, err := dyn.Resource(crdGVR).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, o := range list.Items {
		if strings.HasSuffix(o.GetName(), ".istio.io") || o.GetName() == "dnsendpoints.externaldns.k8s.io" {
			out[o.GetName()] = o.GetAnnotations()["dcm.io/owner"]
		}
	}
	return out
}

var authzGVR = schema.GroupVersionResource{Group: "security.istio.io", Version: "v1", Resource: "authorizationpolicies"}

// denyAll reads the mesh's deny-all AuthorizationPolicy in namespace ns
// of c: its spec, and whether it is there.
func denyAll(t testing.TB, c *kubetest.Cluster, ns string) (map[string]any, bool) {
	t.Helper()
	cfg, err := clientcmd.RESTConfigFromKubeConfig(c.Kubeconfig)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	o, err := dyn.Resource(authzGVR).Namespace(ns).Get(context.Background(), "dcm.deny-all", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	require.NoError(t, err)
	spec, _ := o.Object["spec"].(map[string]any)
	return spec, true
}

// meshSpec reads a logical cloud's spec.service-mesh and spec.ca-root.
func meshSpec(t testing.TB, r *apitest.REST, lc string) (out struct {
	ServiceMesh struct {
		Enabled   bool   `json:"enabled"`
		Namespace string `json:"namespace"`
	} `json:"service-mesh"`
	CaRoot string `json:"ca-root"`
}) {
	t.Helper()
	var body struct {
		Spec json.RawMessage `json:"spec"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", lc, "")), &body))
	require.NoError(t, json.Unmarshal(body.Spec, &out))
	return out
}

// TestMeshLogicalCloudsShareCluster: two mesh-enabled logical clouds on one
// real cluster get a control plane each (revision, istio namespace, a
// cacerts Secret from its own intermediate chaining to the root of the REST
// bundle), the API server accepts every Istio object, the Istio CRDs are
// installed once under the cluster's own owner and stay until the last
// mesh-enabled logical cloud is terminated; the rsync records hold no key,
// the status no data.
func TestMeshLogicalCloudsShareCluster(t *testing.T) {
	h := kubetest.ForTests(t, 3)
	stack := stacktest.Start(t)
	r := apitest.NewREST(t, stack)
	apitest.RegisterHarness(t, r, h)
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"pm"}}`)
	cl := h.Clusters[0]
	ctx := context.Background()
	cs, _ := clientFor(t, cl.Kubeconfig)
	base := "/v2/projects/pm/logical-clouds/"
	names := []string{"ma", "mb"}
	for i, lc := range names {
		r.Want(201, "POST", "/v2/projects/pm/logical-clouds", apitest.MeshBody(lc))
		r.Want(201, "POST", base+lc+"/cluster-references",
			fmt.Sprintf(`{"cluster-provider":"edge","cluster-name":%q,"loadbalancer-ip":"10.0.0.%d"}`, cl.Name, i+1))
		require.True(t, meshSpec(t, r, base+lc).ServiceMesh.Enabled)
	}
	// Both at once: they race to join the cluster's mesh record and submit
	// its CRD rollout; both must win.
	codes := make(chan string, len(names))
	for _, lc := range names {
		go func() { // no require off the test's goroutine
			resp, err := r.C.Post(r.Base+base+lc+"/apply", "application/json", nil)
			if err != nil {
				codes <- lc + " " + err.Error()
				return
			}
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(resp.Body)
			codes <- fmt.Sprintf("%s %d %s", lc, resp.StatusCode, body)
		}()
	}
	for range names {
		got := <-codes
		require.Contains(t, got, " 202 ", got)
	}
	intermediates := map[string]string{}
	for _, lc := range names {
		st := r.Settle(base+lc, "Instantiated")
		require.Equal(t, st.Total, st.Ready, "the API server accepted every object: %+v", st)
		raw := r.Want(200, "GET", base+lc+"/status", "")
		require.Contains(t, raw, `"name":"cacerts"`, "the sensitive Secret is listed")
		require.NotContains(t, raw, "PRIVATE KEY")
		require.NotContains(t, raw, "ca-key")
		kinds := map[string]bool{}
		for _, res := range st.Clusters[0].Resources {
			kinds[res.Kind] = true
		}
		for _, k := range []string{"Deployment", "MutatingWebhookConfiguration", "Secret", "ConfigMap"} {
			require.True(t, kinds[k], "%s: %s in the rollout: %v", lc, k, kinds)
		}

		ns, err := cs.CoreV1().Namespaces().Get(ctx, lc+"-ns", metav1.GetOptions{})
		require.NoError(t, err)
		rev := apitest.MeshRevision(t, r, "pm", lc)
		require.Regexp(t, "^"+lc+"-[0-9a-f]{8}$", rev, "the logical cloud's name and a hash of project and name")
		require.Equal(t, rev, ns.Labels["istio.io/rev"], "sidecar injection by the logical cloud's revision")
		sec, err := cs.CoreV1().Secrets(lc+"-istio-system").Get(ctx, "cacerts", metav1.GetOptions{})
		require.NoError(t, err)
		for _, k := range []string{"ca-cert.pem", "ca-key.pem", "root-cert.pem", "cert-chain.pem"} {
			require.NotEmpty(t, sec.Data[k], "%s: cacerts %s", lc, k)
		}
		intermediates[lc] = string(sec.Data["ca-cert.pem"])
		// Seed 004's deny-all, installed with the mesh: an ALLOW policy
		// matching nothing in the workloads' namespace, none in the
		// gateways'.
		spec, ok := denyAll(t, cl, lc+"-ns")
		require.True(t, ok, "%s: the deny-all AuthorizationPolicy is in its namespace", lc)
		require.Equal(t, kube.DenyAllPolicySpec(), spec, "the rule no certificate matches")
		_, ok = denyAll(t, cl, lc+"-istio-system")
		require.False(t, ok, "no deny-all in the istio namespace")

		// The intermediate chains to the root of the REST bundle.
		var bundle struct {
			CaCert   string `json:"ca-cert"`
			RootCert string `json:"root-cert"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.Want(200, "GET", "/v1/cadist/projects/pm/logicalclouds/"+lc+"/clusters/"+cl.Name, "")), &bundle))
		require.Equal(t, bundle.CaCert, string(sec.Data["ca-cert.pem"]), "the cluster holds the bundle's intermediate")
		roots := x509.NewCertPool()
		for _, c := range apitest.PEMCerts(t, []byte(bundle.RootCert)) {
			roots.AddCert(c)
		}
		inter := apitest.PEMCerts(t, sec.Data["ca-cert.pem"])[0]
		require.True(t, inter.IsCA)
		_, err = inter.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
		require.NoError(t, err, "%s: intermediate chains to the bundle's root", lc)
	}
	require.NotEqual(t, intermediates["ma"], intermediates["mb"], "an intermediate per logical cloud")

	// The CRDs: once, under the cluster's own owner, on that cluster only.
	owner := "mesh/edge/" + cl.Name
	crds := istioCRDs(t, cl)
	require.NotEmpty(t, crds)
	for name, o := range crds {
		require.Equal(t, owner, o, "%s belongs to no logical cloud", name)
	}
	require.Empty(t, istioCRDs(t, h.Clusters[1]), "no mesh-enabled logical cloud on %s", h.Clusters[1].Name)

	// A third logical cloud whose Istio namespace is mb's workload
	// namespace is refused before anything is submitted (409, named).
	r.Want(201, "POST", "/v2/projects/pm/logical-clouds", `{"metadata":{"name":"mc"},"spec":{"service-mesh":{"enabled":true,"namespace":"mb-ns"}}}`)
	r.Want(201, "POST", base+"mc/cluster-references", fmt.Sprintf(`{"cluster-provider":"edge","cluster-name":%q}`, cl.Name))
	taken := r.Want(409, "POST", base+"mc/apply", "")
	require.Equal(t, "OWNED_BY_OTHER", decodeMap(t, taken)["reason"], taken)
	require.Contains(t, taken, "mb-ns")
	require.Equal(t, "Created", r.Status(base+"mc").State)
	r.Want(204, "DELETE", base+"mc", "")

	// rsync's records hold no key (the cacerts manifests are sealed).
	for _, coll := range []string{"rollouts", "rollout_clusters"} {
		cur, err := stack.Env.Store.Database().Collection(coll).Find(ctx, bson.D{})
		require.NoError(t, err)
		var docs []bson.Raw
		require.NoError(t, cur.All(ctx, &docs))
		for _, d := range docs {
			require.NotContains(t, d.String(), "PRIVATE KEY", "%s holds key material", coll)
			require.NotContains(t, d.String(), "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0t", "%s holds key material (base64)", coll)
			require.NotContains(t, d.String(), "ca-key.pem", "%s holds a cacerts manifest", coll)
		}
	}

	// Terminate one: its control plane and cacerts go, the CRDs stay.
	r.Want(202, "POST", base+"ma/terminate", "")
	r.Settle(base+"ma", "Terminated")
	_, err := cs.CoreV1().Secrets("ma-istio-system").Get(ctx, "cacerts", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "ma's cacerts: %v", err)
	_, err = cs.CoreV1().Namespaces().Get(ctx, "ma-istio-system", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "ma's istio namespace: %v", err)
	require.Empty(t, leftOn(t, cl, "pm", "ma"), "nothing of ma's left")
	apitest.Eventually(t, "ma's deny-all is removed", func() bool { _, ok := denyAll(t, cl, "ma-ns"); return !ok })
	_, ok := denyAll(t, cl, "mb-ns")
	require.True(t, ok, "mb's deny-all is untouched")
	require.Equal(t, crds, istioCRDs(t, cl), "the CRDs stay while mb uses the cluster")
	_, err = cs.CoreV1().Secrets("mb-istio-system").Get(ctx, "cacerts", metav1.GetOptions{})
	require.NoError(t, err, "mb's control plane is untouched")

	// mb's mesh off (PUT, then update): its control plane and the CRDs go
	// (it was their last user), its namespace loses the revision label.
	r.Want(200, "PUT", base+"mb", `{"metadata":{"name":"mb"},"spec":{"service-mesh":{"enabled":false}}}`)
	r.Want(202, "POST", base+"mb/update", "")
	r.Settle(base+"mb", "Instantiated")
	apitest.Eventually(t, "the Istio CRDs are deleted with their last user's mesh", func() bool { return len(istioCRDs(t, cl)) == 0 })
	apitest.Eventually(t, "mb's istio namespace is deleted", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, "mb-istio-system", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "mb-ns", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, ns.Labels, "istio.io/rev")
	_, ok = denyAll(t, cl, "mb-ns")
	require.False(t, ok, "no mesh, no deny-all")

	// On again: the CRDs come back under the cluster's owner (a moment
	// after their deletion the join may be 409 STILL_DELETING: retried).
	r.Want(200, "PUT", base+"mb", `{"metadata":{"name":"mb"},"spec":{"service-mesh":{"enabled":true}}}`)
	apitest.Eventually(t, "mb's update is taken", func() bool {
		got, body := apitest.Call(t, r.C, "POST", r.Base+base+"mb/update", "")
		if got == 409 && strings.Contains(string(body), "STILL_DELETING") {
			return false
		}
		require.Equal(t, 202, got, "%s", body)
		return true
	})
	r.Settle(base+"mb", "Instantiated")
	require.Equal(t, crds, istioCRDs(t, cl))

	// Terminate the other: the CRDs go too.
	r.Want(202, "POST", base+"mb/terminate", "")
	r.Settle(base+"mb", "Terminated")
	apitest.Eventually(t, "the Istio CRDs are deleted", func() bool { return len(istioCRDs(t, cl)) == 0 })

	// Delete: the cascade purges the service mesh and CA records.
	for _, lc := range names {
		r.Want(204, "DELETE", base+lc, "")
		r.Want(404, "GET", "/v1/cadist/projects/pm/logicalclouds/"+lc+"/clusters/"+cl.Name, "")
	}
}

// TestMeshRefusals: bodies that cannot have a mesh are 400 naming the field.
func TestMeshRefusals(t *testing.T) {
	r := apitest.NewREST(t, stacktest.Start(t))
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"pr"}}`)
	lcs := "/v2/projects/pr/logical-clouds"
	for _, c := range []struct{ body, field string }{
		{`{"metadata":{"name":"adm"},"spec":{"level":"admin","service-mesh":{"enabled":true}}}`, "spec.service-mesh"},
		{`{"metadata":{"name":"adm"},"spec":{"level":"admin","ca-root":"r1"}}`, "spec.ca-root"},
		{`{"metadata":{"name":"m1"},"spec":{"namespace":"m1","service-mesh":{"enabled":true,"namespace":"m1"}}}`, "spec.service-mesh.namespace"},
		{`{"metadata":{"name":"m1"},"spec":{"service-mesh":{"enabled":true,"namespace":"istio-system"}}}`, "spec.service-mesh.namespace"},
		{`{"metadata":{"name":"` + strings.Repeat("m", 55) + `"},"spec":{"service-mesh":{"enabled":true}}}`, "spec.service-mesh.namespace"},
	} {
		body := r.Want(400, "POST", lcs, c.body)
		require.Equal(t, c.field, decodeMap(t, body)["field"], "%s: %s", c.body, body)
	}
	// PUT turns the mesh on (from the next update) and names a root (one
	// of the project's: docs/mesh.md).
	r.Want(201, "POST", "/v2/cadist/roots", `{"metadata":{"name":"r1"},"projects":["pr"]}`)
	r.Want(201, "POST", lcs, `{"metadata":{"name":"m2"},"spec":{"namespace":"m2-ns"}}`)
	r.Want(200, "PUT", lcs+"/m2", `{"metadata":{"name":"m2"},"spec":{"service-mesh":{"enabled":true},"ca-root":"r1"}}`)
	got := meshSpec(t, r, lcs+"/m2")
	require.True(t, got.ServiceMesh.Enabled)
	require.Equal(t, "r1", got.CaRoot)
	body := r.Want(400, "PUT", lcs+"/m2", `{"metadata":{"name":"m2"},"spec":{"service-mesh":{"enabled":true,"namespace":"m2-ns"}}}`)
	require.Equal(t, "spec.service-mesh.namespace", decodeMap(t, body)["field"])
}
