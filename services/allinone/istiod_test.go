package allinone_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/dcm-project/dcm/platform/kubetest"
	"github.com/dcm-project/dcm/platform/kubetest/istiotest"
	"github.com/dcm-project/dcm/services/allinone/internal/apitest"
	"github.com/dcm-project/dcm/services/allinone/internal/stacktest"
)

// deploymentEnv is what the kubelet would give istiod from the
// istiod-<rev> Deployment DCM applied: the discovery container's literal
// env (valueFrom entries need a Pod: the harness sets POD_NAMESPACE and
// POD_NAME itself).
func deploymentEnv(t testing.TB, cs *kubernetes.Clientset, ns, rev string) (env []string, clusterID string) {
	t.Helper()
	d, err := cs.AppsV1().Deployments(ns).Get(context.Background(), "istiod-"+rev, metav1.GetOptions{})
	require.NoError(t, err, "DCM applied istiod-%s", rev)
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != "discovery" {
			continue
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil {
				continue
			}
			env = append(env, e.Name+"="+e.Value)
			if e.Name == "CLUSTER_ID" {
				clusterID = e.Value
			}
		}
	}
	require.NotEmpty(t, env, "istiod-%s has a discovery container with env", rev)
	require.NotEmpty(t, clusterID, "istiod-%s sets CLUSTER_ID", rev)
	return env, clusterID
}

// serviceAccountKubeconfig writes a kubeconfig for the cluster with a
// token of ServiceAccount ns/name of the API server's audience: what the
// kubelet gives a Pod of that ServiceAccount (the in-cluster config), so
// that istiod runs with the rendered RBAC, not as the cluster's admin.
func serviceAccountKubeconfig(ctx context.Context, t testing.TB, c *kubetest.Cluster, ns, name string) string {
	t.Helper()
	token, err := istiotest.ServiceAccountToken(ctx, c, ns, name, "https://kubernetes.default.svc")
	require.NoError(t, err, "DCM applied ServiceAccount %s/%s", ns, name)
	cfg, err := clientcmd.Load(c.Kubeconfig)
	require.NoError(t, err)
	kctx := cfg.Contexts[cfg.CurrentContext]
	require.NotNil(t, kctx)
	cluster := cfg.Clusters[kctx.Cluster]
	out := clientcmdapi.NewConfig()
	out.Clusters["c"] = cluster
	out.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
	out.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "sa", Namespace: ns}
	out.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*out, path))
	return path
}

// workloadCSR is a workload's CSR; istiod takes the identity from the
// token, not from the CSR.
func workloadCSR(t testing.TB) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{Organization: []string{"dcm-test"}}}, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// rootCertCM is root-cert.pem of istio-ca-root-cert in ns ("" if absent).
func rootCertCM(t testing.TB, cs *kubernetes.Clientset, ns string) string {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(context.Background(), "istio-ca-root-cert", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return cm.Data["root-cert.pem"]
}

// TestIstiodOnDCMObjects is issue 17's proof with DCM's own objects: two
// mesh-enabled logical clouds made over REST share a real cluster (one of
// them spans a second), and a real istiod per logical cloud runs on that
// cluster, out of cluster, on the cacerts Secret and istio-<rev> mesh
// ConfigMap DCM applied, with the Deployment's literal env. Each signs a
// workload certificate (token of a ServiceAccount the logical cloud's own
// user created) that chains to the REST bundle's intermediate and root;
// discovery selectors keep each to its own namespaces; ia's istiod on its
// second cluster signs with that cluster's intermediate under the same root;
// each of ia's clusters gets a remote secret of the other, with which ia's
// istiod on cluster-1 reads cluster-2's endpoints (and only with the
// reader's rights), sealed in rsync's records; a rotation to a new root
// reaches istiod through /update; terminate removes everything.
func TestIstiodOnDCMObjects(t *testing.T) {
	t.Setenv("DCM_MESH_PEERS_INTERVAL", "1s")
	began := time.Now()
	h := kubetest.ForTests(t, 3)
	stack := stacktest.Start(t)
	r := apitest.NewREST(t, stack)
	apitest.RegisterHarness(t, r, h)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	shared, second := h.Clusters[0], h.Clusters[1]
	admin, _ := clientFor(t, shared.Kubeconfig)

	// A root of the project's own (the project's default root).
	rootReady := func(name string) {
		apitest.Eventually(t, "root "+name+" is ready", func() bool {
			return decodeMap(t, r.Want(200, "GET", "/v2/cadist/roots/"+name, ""))["state"] == "ready"
		})
	}
	r.Want(201, "POST", "/v2/cadist/roots", `{"metadata":{"name":"corp-mesh"},"projects":["pi"]}`)
	rootReady("corp-mesh")
	r.Want(201, "POST", "/v2/projects", `{"metadata":{"name":"pi"}}`)

	type plane struct {
		lc, ns, istioNS string
		rev             string
		clusters        []*kubetest.Cluster
		user            *kubernetes.Clientset
		istiod          *istiotest.Istiod
		bundle          apitest.MeshBundle
	}
	planes := []*plane{
		{lc: "ia", ns: "ia-ns", istioNS: "ia-istio-system", clusters: []*kubetest.Cluster{shared, second}},
		{lc: "ib", ns: "ib-ns", istioNS: "ib-istio-system", clusters: []*kubetest.Cluster{shared}},
	}
	base := "/v2/projects/pi/logical-clouds/"
	for k, p := range planes {
		// The user may make ServiceAccounts in the logical cloud's
		// namespace: the workload's identity is the logical cloud's own.
		r.Want(201, "POST", "/v2/projects/pi/logical-clouds", fmt.Sprintf(`{"metadata":{"name":%q},
		  "spec":{"namespace":%q,"service-mesh":{"enabled":true},"user":{"user-name":"dev","user-permissions":[
		    {"permission-name":"sa","apiGroups":[""],"resources":["serviceaccounts"],"verbs":["get","create"]}]}}}`, p.lc, p.ns))
		for i, c := range p.clusters {
			r.Want(201, "POST", base+p.lc+"/cluster-references",
				fmt.Sprintf(`{"cluster-provider":"edge","cluster-name":%q,"loadbalancer-ip":"192.0.2.%d"}`, c.Name, 10*(k+2)+i+1))
		}
		r.Want(202, "POST", base+p.lc+"/apply", "")
	}
	for _, p := range planes {
		st := r.Settle(base+p.lc, "Instantiated")
		require.Equal(t, st.Total, st.Ready, "%s: every object applied: %+v", p.lc, st)
		p.bundle = r.Bundle("pi", p.lc, shared.Name)
		p.rev = apitest.MeshRevision(t, r, "pi", p.lc)
		require.Equal(t, "corp-mesh", p.bundle.Root)
		require.Equal(t, p.lc+".pi.dcm.local", p.bundle.TrustDomain)
		p.user, _ = clientFor(t, r.Kubeconfig(base+p.lc+"/cluster-references/"+shared.Name+"/kubeconfig"))
		_, err := p.user.CoreV1().ServiceAccounts(p.ns).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
		require.NoError(t, err, "%s's user makes a ServiceAccount in its namespace", p.lc)
	}
	t.Logf("2 logical clouds applied and Instantiated %s after the start", time.Since(began).Round(100*time.Millisecond))
	ia, ib := planes[0], planes[1]
	require.NotEqual(t, ia.bundle.CaCert, ib.bundle.CaCert, "an intermediate per logical cloud")
	require.NotEqual(t, ia.bundle.CaCert, r.Bundle("pi", "ia", second.Name).CaCert, "an intermediate per cluster")

	istiodKubeconfig := map[string]string{}
	for _, p := range planes {
		// istiod out of cluster: what DCM applied (cacerts, istio-<rev>,
		// the Deployment's env), plus what the kubelet would give a Pod
		// (POD_NAMESPACE, POD_NAME, a token of its ServiceAccount; the
		// harness's listen addresses and ROOT_CA_DIR; see docs/mesh.md).
		env, clusterID := deploymentEnv(t, admin, p.istioNS, p.rev)
		t.Logf("%s: the Deployment's literal env: %s", p.lc, strings.Join(env, " "))
		istiodKubeconfig[p.lc] = serviceAccountKubeconfig(ctx, t, shared, p.istioNS, "istiod-"+p.rev)
		p.istiod = istiotest.StartIstiod(ctx, t, shared, istiotest.IstiodOptions{
			Revision: p.rev, Namespace: p.istioNS, ClusterID: clusterID, Env: env,
			Kubeconfig: istiodKubeconfig[p.lc]})
		t.Logf("istiod %s: ready %s after exec", p.lc, p.istiod.Started.Round(10*time.Millisecond))
	}
	t.Run("confined", func(t *testing.T) {
		// Issue 29: the credential ia's istiod runs with (a token of its
		// ServiceAccount) reaches no other tenant's CA key, no Secret list,
		// no Deployment in kube-system, no other webhook configuration.
		kc, err := os.ReadFile(istiodKubeconfig["ia"])
		require.NoError(t, err)
		sa, _ := clientFor(t, kc)
		forbidden := func(what string, err error) {
			t.Helper()
			require.True(t, apierrors.IsForbidden(err), "ia's istiod: %s: %v", what, err)
			t.Logf("ia's istiod: %s: %v", what, err)
		}
		_, err = sa.CoreV1().Secrets(ib.istioNS).Get(ctx, "cacerts", metav1.GetOptions{})
		forbidden("read ib's cacerts", err)
		_, err = sa.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
		forbidden("list every Secret", err)
		one := int32(1)
		_, err = sa.AppsV1().Deployments("kube-system").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"},
			Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		forbidden("create a Deployment in kube-system", err)
		hooks, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{LabelSelector: "istio.io/rev=" + ib.rev})
		require.NoError(t, err)
		require.NotEmpty(t, hooks.Items)
		_, err = sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Patch(ctx, hooks.Items[0].Name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
		forbidden("patch ib's injector", err)
		// Its own injector's caBundle, which it patched itself.
		own, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{LabelSelector: "istio.io/rev=" + ia.rev})
		require.NoError(t, err)
		require.NotEmpty(t, own.Items)
		apitest.Eventually(t, "ia's istiod patched its injector's caBundle", func() bool {
			w, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, own.Items[0].Name, metav1.GetOptions{})
			require.NoError(t, err)
			return len(w.Webhooks) > 0 && len(w.Webhooks[0].ClientConfig.CABundle) > 0
		})
	})

	// issueOn asks istiod d on cluster c for a certificate for p.ns/app and
	// returns the chain (leaf first); issue asks p's istiod on the shared
	// cluster.
	issueOn := func(c *kubetest.Cluster, d *istiotest.Istiod, p *plane, roots *x509.CertPool) []*x509.Certificate {
		t.Helper()
		token, err := istiotest.ServiceAccountToken(ctx, c, p.ns, "app", "istio-ca")
		require.NoError(t, err)
		chainPEM, err := istiotest.RequestCertificate(ctx, d.SecureGRPCAddr, roots,
			"istiod-"+p.rev+"."+p.istioNS+".svc", token, workloadCSR(t))
		require.NoError(t, err, "%s on %s: CreateCertificate", p.lc, c.Name)
		return apitest.PEMCerts(t, []byte(strings.Join(chainPEM, "")))
	}
	issue := func(p *plane, roots *x509.CertPool) []*x509.Certificate {
		t.Helper()
		return issueOn(shared, p.istiod, p, roots)
	}
	leaves := map[string]*x509.Certificate{}
	for _, p := range planes {
		t.Run(p.lc, func(t *testing.T) {
			body, err := p.istiod.Get(ctx, "/debug/mesh")
			require.NoError(t, err)
			var mesh struct {
				TrustDomain   string `json:"trustDomain"`
				RootNamespace string `json:"rootNamespace"`
				DefaultConfig struct {
					DiscoveryAddress string `json:"discoveryAddress"`
				} `json:"defaultConfig"`
				DiscoverySelectors []struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"discoverySelectors"`
			}
			require.NoError(t, json.Unmarshal(body, &mesh))
			require.Equal(t, p.bundle.TrustDomain, mesh.TrustDomain, "istiod read DCM's istio-%s ConfigMap", p.lc)
			// Not istio-system: two control planes on a cluster share no root namespace.
			require.Equal(t, p.istioNS, mesh.RootNamespace)
			require.Equal(t, "istiod-"+p.rev+"."+p.istioNS+".svc:15012", mesh.DefaultConfig.DiscoveryAddress)
			require.Len(t, mesh.DiscoverySelectors, 1)
			require.Equal(t, map[string]string{"dcm.io/project": "pi", "dcm.io/logical-cloud": p.lc},
				mesh.DiscoverySelectors[0].MatchLabels)

			chain := issue(p, apitest.Pool(t, p.bundle.RootCert))
			leaf := chain[0]
			require.Len(t, leaf.URIs, 1)
			want := fmt.Sprintf("spiffe://%s/ns/%s/sa/app", p.bundle.TrustDomain, p.ns)
			require.Equal(t, want, leaf.URIs[0].String())
			inter := apitest.PEMCerts(t, []byte(p.bundle.CaCert))[0]
			require.True(t, chain[1].Equal(inter), "issued by the bundle's ca-cert, the cluster's intermediate")
			_, err = leaf.Verify(x509.VerifyOptions{Roots: apitest.Pool(t, p.bundle.RootCert), Intermediates: apitest.Pool(t, p.bundle.CaCert),
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			require.NoError(t, err, "the leaf chains to the intermediate and the bundle's root-cert")
			leaves[p.lc] = leaf
			t.Logf("%s: %s, issuer %q serial %x", p.lc, want, leaf.Issuer.String(), inter.SerialNumber)

			// istiod publishes the root in its own namespaces only.
			apitest.Eventually(t, "istio-ca-root-cert in "+p.ns, func() bool { return rootCertCM(t, admin, p.ns) == p.bundle.RootCert })
		})
	}
	require.Error(t, leaves["ia"].CheckSignatureFrom(apitest.PEMCerts(t, []byte(ib.bundle.CaCert))[0]), "ia's leaf is not ib's intermediate's")
	require.Error(t, leaves["ib"].CheckSignatureFrom(apitest.PEMCerts(t, []byte(ia.bundle.CaCert))[0]), "ib's leaf is not ia's intermediate's")
	require.Empty(t, rootCertCM(t, admin, "default"), "no istiod selects default")
	require.Empty(t, rootCertCM(t, admin, "kube-system"), "no istiod selects kube-system")

	t.Run("ia on "+second.Name, func(t *testing.T) {
		// ia's other cluster: its own control plane, its own intermediate.
		user, _ := clientFor(t, r.Kubeconfig(base+"ia/cluster-references/"+second.Name+"/kubeconfig"))
		_, err := user.CoreV1().ServiceAccounts(ia.ns).Create(ctx,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		admin2, _ := clientFor(t, second.Kubeconfig)
		env, clusterID := deploymentEnv(t, admin2, ia.istioNS, ia.rev)
		require.Equal(t, "edge-"+second.Name, clusterID)
		d := istiotest.StartIstiod(ctx, t, second, istiotest.IstiodOptions{
			Revision: ia.rev, Namespace: ia.istioNS, ClusterID: clusterID, Env: env,
			Kubeconfig: serviceAccountKubeconfig(ctx, t, second, ia.istioNS, "istiod-"+ia.rev)})
		t.Logf("istiod ia on %s: ready %s after exec", second.Name, d.Started.Round(10*time.Millisecond))
		b := r.Bundle("pi", "ia", second.Name)
		chain := issueOn(second, d, ia, apitest.Pool(t, b.RootCert))
		require.Equal(t, "spiffe://ia.pi.dcm.local/ns/ia-ns/sa/app", chain[0].URIs[0].String(), "one trust domain on both clusters")
		require.True(t, chain[1].Equal(apitest.PEMCerts(t, []byte(b.CaCert))[0]), "issued by %s's intermediate", second.Name)
		require.False(t, chain[1].Equal(apitest.PEMCerts(t, []byte(ia.bundle.CaCert))[0]), "not %s's", shared.Name)
		_, err = chain[0].Verify(x509.VerifyOptions{Roots: apitest.Pool(t, ia.bundle.RootCert), Intermediates: apitest.Pool(t, b.CaCert),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		require.NoError(t, err, "the same root as on %s", shared.Name)
		log := d.LogTail(100000)
		require.Contains(t, log, "cacerts Secret found in config cluster")
		require.NotContains(t, log, "forbidden")
		d.Stop()
	})

	t.Run("remote secrets", func(t *testing.T) {
		// Each cluster of ia gets a remote secret of the other (core's
		// MeshPeers, every DCM_MESH_PEERS_INTERVAL: 1s here); ib, on one
		// cluster, none. With it, ia's istiod on cluster-1 reads
		// cluster-2 as istio-reader-service-account and sees its
		// endpoints.
		admin2, _ := clientFor(t, second.Kubeconfig)
		remote := func(cs *kubernetes.Clientset, ns, of string) *corev1.Secret {
			var got *corev1.Secret
			apitest.Eventually(t, "a remote secret of "+of+" in "+ns, func() bool {
				sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "istio-remote-secret-"+of, metav1.GetOptions{})
				got = sec
				return err == nil
			})
			require.Equal(t, "true", got.Labels["istio/multiCluster"])
			require.Equal(t, of, got.Annotations["networking.istio.io/cluster"])
			require.Len(t, got.Data, 1)
			return got
		}
		id1, id2 := "edge-"+shared.Name, "edge-"+second.Name
		on1 := remote(admin, ia.istioNS, id2)
		remote(admin2, ia.istioNS, id1)
		for _, ns := range []string{ib.istioNS, ia.ns, ib.ns} {
			list, err := admin.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "istio/multiCluster=true"})
			require.NoError(t, err)
			require.Empty(t, list.Items, "no remote secret in %s", ns)
		}

		// The kubeconfig reads cluster-2 and nothing more: the reader's
		// ClusterRole.
		reader, _ := clientFor(t, on1.Data[id2])
		require.True(t, canI(t, reader, "list", "pods", ""), "the reader lists pods")
		require.True(t, canI(t, reader, "watch", "services", ""), "the reader watches services")
		require.False(t, canI(t, reader, "get", "secrets", ia.istioNS), "the reader reads no Secret")
		require.False(t, canI(t, reader, "create", "configmaps", ia.ns), "the reader writes nothing")

		// An endpoint on cluster-2 only, as its endpoints controller would
		// write it (no node runs the pod).
		port, proto, portName := int32(7070), corev1.ProtocolTCP, "grpc"
		_, err := admin2.CoreV1().Services(ia.ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "peer"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "grpc", Port: port}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = admin2.DiscoveryV1().EndpointSlices(ia.ns).Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "peer-1", Labels: map[string]string{discoveryv1.LabelServiceName: "peer"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.99.0.7"}}},
			Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		apitest.Eventually(t, "ia's istiod on "+shared.Name+" syncs "+id2, func() bool {
			b, err := ia.istiod.Get(ctx, "/debug/clusterz")
			return err == nil && strings.Contains(string(b), `"`+id2+`"`) && strings.Contains(string(b), "synced")
		})
		apitest.Eventually(t, "ia's istiod on "+shared.Name+" sees "+id2+"'s endpoint", func() bool {
			b, err := ia.istiod.Get(ctx, "/debug/endpointShardz")
			return err == nil && strings.Contains(string(b), "peer.ia-ns.svc.cluster.local") && strings.Contains(string(b), "10.99.0.7")
		})
		b, err := ib.istiod.Get(ctx, "/debug/endpointShardz")
		require.NoError(t, err)
		require.NotContains(t, string(b), "10.99.0.7", "ib's istiod reads no other cluster")

		// rsync's records hold no token: the remote secrets are sealed.
		token := string(on1.Data[id2])
		_, tok, ok := strings.Cut(token, "token: ")
		require.True(t, ok)
		tok, _, _ = strings.Cut(tok, "\n")
		require.Greater(t, len(tok), 100)
		for _, coll := range []string{"rollouts", "rollout_clusters"} {
			cur, err := stack.Env.Store.Database().Collection(coll).Find(ctx, bson.D{})
			require.NoError(t, err)
			var docs []bson.Raw
			require.NoError(t, cur.All(ctx, &docs))
			for _, d := range docs {
				require.NotContains(t, d.String(), tok[:40], "%s holds a reader's token", coll)
			}
		}
		require.NoError(t, admin2.CoreV1().Services(ia.ns).Delete(ctx, "peer", metav1.DeleteOptions{}))
		require.NoError(t, admin2.DiscoveryV1().EndpointSlices(ia.ns).Delete(ctx, "peer-1", metav1.DeleteOptions{}))

		// An update that leaves ia on one cluster deletes its remote
		// secret there; ia leaves cluster-2 whole, the Istio CRDs with
		// it (no other mesh logical cloud is there).
		r.Want(204, "DELETE", base+"ia/cluster-providers/edge/cluster-references/"+second.Name, "")
		r.Want(202, "POST", base+"ia/update", "")
		r.Settle(base+"ia", "Instantiated")
		apitest.Eventually(t, "ia's remote secret of "+id2+" deleted on "+shared.Name, func() bool {
			_, err := admin.CoreV1().Secrets(ia.istioNS).Get(ctx, "istio-remote-secret-"+id2, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		apitest.Eventually(t, "nothing of ia left on "+second.Name, func() bool { return len(leftOn(t, second, "pi", "ia")) == 0 })
		apitest.Eventually(t, "the Istio CRDs deleted on "+second.Name, func() bool { return len(istioCRDs(t, second)) == 0 })
	})

	t.Run("rotation", func(t *testing.T) {
		r.Want(201, "POST", "/v2/cadist/roots", `{"metadata":{"name":"corp-mesh-2"},"shared":true}`)
		rootReady("corp-mesh-2")
		r.Want(200, "POST", base+"ia/ca/rotate", `{"root":"corp-mesh-2"}`)
		start := time.Now()
		r.Want(202, "POST", base+"ia/update", "")
		st := r.Settle(base+"ia", "Instantiated")
		require.Equal(t, st.Total, st.Ready, "%+v", st)
		b := r.Bundle("pi", "ia", shared.Name)
		require.Equal(t, []string{"corp-mesh-2", "corp-mesh"}, b.TrustedRoots, "the overlap")
		require.Len(t, apitest.PEMCerts(t, []byte(b.RootCert)), 2)
		require.NotEqual(t, ia.bundle.CaCert, b.CaCert, "a new intermediate")
		sec, err := admin.CoreV1().Secrets(ia.istioNS).Get(ctx, "cacerts", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, b.CaCert, string(sec.Data["ca-cert.pem"]), "the update applied the new intermediate")
		require.Equal(t, b.RootCert, string(sec.Data["root-cert.pem"]), "and both roots")
		updated := time.Since(start)

		start = time.Now()
		require.NoError(t, ia.istiod.ReloadCACerts(ctx, shared))
		inter := apitest.PEMCerts(t, []byte(b.CaCert))[0]
		newRoot := apitest.PEMCerts(t, []byte(b.RootCert))[0]
		apitest.Eventually(t, "ia's istiod signs with the new intermediate", func() bool {
			return issue(ia, apitest.Pool(t, b.RootCert))[1].Equal(inter)
		})
		chain := issue(ia, apitest.Pool(t, b.RootCert))
		only := x509.NewCertPool()
		only.AddCert(newRoot)
		_, err = chain[0].Verify(x509.VerifyOptions{Roots: only, Intermediates: apitest.Pool(t, b.CaCert),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		require.NoError(t, err, "the new leaf chains to the new root")
		apitest.Eventually(t, "istio-ca-root-cert in ia-ns holds both roots", func() bool { return rootCertCM(t, admin, ia.ns) == b.RootCert })
		t.Logf("rotation: rotate+update+settle %s; istiod signs with the new intermediate (serial %x) %s after the reload",
			updated.Round(10*time.Millisecond), inter.SerialNumber, time.Since(start).Round(10*time.Millisecond))
		// ib's namespace still holds ib's root alone: ia's istiod, which now
		// publishes two roots, does not select it.
		require.Equal(t, ib.bundle.RootCert, rootCertCM(t, admin, ib.ns))
		require.Len(t, apitest.PEMCerts(t, []byte(rootCertCM(t, admin, ib.ns))), 1)
		// ib is untouched.
		require.True(t, issue(ib, apitest.Pool(t, ib.bundle.RootCert))[1].Equal(apitest.PEMCerts(t, []byte(ib.bundle.CaCert))[0]))
	})

	// istiod loaded the CA from DCM's Secret, and the rendered RBAC let it
	// do all it tried (with the Deployment's ServiceAccount, no admin).
	for _, p := range planes {
		log := p.istiod.LogTail(100000)
		require.Contains(t, log, "cacerts Secret found in config cluster", "istiod %s", p.lc)
		require.NotContains(t, log, "forbidden", "istiod %s ran into the rendered RBAC", p.lc)
	}

	// Terminate both: control planes, cacerts and (with the last) the CRDs go.
	for _, p := range planes {
		p.istiod.Stop()
	}
	require.NotEmpty(t, istioCRDs(t, shared))
	terminating := time.Now()
	r.Want(202, "POST", base+"ib/terminate", "")
	r.Settle(base+"ib", "Terminated")
	require.NotEmpty(t, istioCRDs(t, shared), "the CRDs stay while ia uses the cluster")
	r.Want(202, "POST", base+"ia/terminate", "")
	r.Settle(base+"ia", "Terminated")
	for _, c := range []*kubetest.Cluster{shared, second} {
		cs, _ := clientFor(t, c.Kubeconfig)
		for _, p := range planes {
			require.Empty(t, leftOn(t, c, "pi", p.lc), "nothing of %s left on %s", p.lc, c.Name)
			apitest.Eventually(t, p.istioNS+" deleted on "+c.Name, func() bool {
				_, err := cs.CoreV1().Namespaces().Get(ctx, p.istioNS, metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			})
			deps, err := cs.AppsV1().Deployments(p.istioNS).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			require.Empty(t, deps.Items)
		}
		apitest.Eventually(t, "the Istio CRDs deleted on "+c.Name, func() bool { return len(istioCRDs(t, c)) == 0 })
		mutating, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		validating, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var hooks []string
		for _, w := range mutating.Items {
			hooks = append(hooks, w.Name)
		}
		for _, w := range validating.Items {
			hooks = append(hooks, w.Name)
		}
		for _, n := range hooks {
			require.NotContains(t, n, "istio", "no Istio webhook left on %s", c.Name)
		}
	}
	t.Logf("terminate of both until everything is gone: %s", time.Since(terminating).Round(100*time.Millisecond))
	t.Logf("whole test %s", time.Since(began).Round(100*time.Millisecond))
}
