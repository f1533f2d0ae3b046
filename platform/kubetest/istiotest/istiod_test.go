package istiotest

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
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dcm-project/dcm/platform/kubetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubetest.StopShared()
	os.Exit(code)
}

// TestIstiodIssuesWorkloadCertificates runs two istiods (revisions lc1 and
// lc2, one intermediate each under one root) side by side against one test
// cluster, out of cluster, each loading its cacerts Secret and mesh
// ConfigMap from the cluster, and asks each for a workload certificate with
// a ServiceAccount token of audience istio-ca.
func TestIstiodIssuesWorkloadCertificates(t *testing.T) {
	c := kubetest.ForTests(t, 1).Clusters[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	crds, err := CRDs()
	require.NoError(t, err)
	objs, err := SplitYAML(crds)
	require.NoError(t, err)
	require.Len(t, objs, 15, "Istio's CRDs")
	start := time.Now()
	require.NoError(t, InstallCRDs(ctx, c))
	t.Logf("Istio's 15 CRDs applied and Established in %s", time.Since(start).Round(10*time.Millisecond))
	root := newTestCA(t, nil, "")

	type plane struct {
		rev, trustDomain, istioNS, workloadNS string
		inter                                 *testCA
		istiod                                *Istiod
	}
	planes := []*plane{
		{rev: "lc1", trustDomain: "lc1.p1.dcm.local", istioNS: "lc1-istio-system", workloadNS: "lc1-ns"},
		{rev: "lc2", trustDomain: "lc2.p1.dcm.local", istioNS: "lc2-istio-system", workloadNS: "lc2-ns"},
	}
	for _, p := range planes {
		p.inter = newTestCA(t, root, p.trustDomain)
		applyControlPlaneFixtures(ctx, t, c, p.rev, p.trustDomain, p.istioNS, p.workloadNS, root, p.inter)
	}
	// Side by side: both run while either is asked.
	for _, p := range planes {
		// ISTIO_MULTIROOT_MESH as DCM's chart values set it (root rotation).
		p.istiod = StartIstiod(ctx, t, c, IstiodOptions{Revision: p.rev, Namespace: p.istioNS, ClusterID: "cluster-1",
			Env: []string{"ISTIO_MULTIROOT_MESH=true"}})
		rss, err := p.istiod.RSS()
		require.NoError(t, err)
		t.Logf("istiod %s: ready %s after exec, RSS %d MiB", p.rev, p.istiod.Started.Round(10*time.Millisecond), rss>>20)
	}

	roots := x509.NewCertPool()
	roots.AddCert(root.cert)
	for _, p := range planes {
		t.Run(p.rev, func(t *testing.T) {
			body, err := p.istiod.Get(ctx, "/debug/mesh")
			require.NoError(t, err)
			var mesh struct {
				TrustDomain        string `json:"trustDomain"`
				DiscoverySelectors []struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"discoverySelectors"`
			}
			require.NoError(t, json.Unmarshal(body, &mesh))
			require.Equal(t, p.trustDomain, mesh.TrustDomain, "istiod reads the istio-%s ConfigMap", p.rev)
			require.Len(t, mesh.DiscoverySelectors, 1)
			require.Equal(t, p.rev, mesh.DiscoverySelectors[0].MatchLabels["dcm.io/logical-cloud"])

			token, err := ServiceAccountToken(ctx, c, p.workloadNS, "app", "istio-ca")
			require.NoError(t, err)
			chainPEM, err := RequestCertificate(ctx, p.istiod.SecureGRPCAddr, roots,
				"istiod-"+p.rev+"."+p.istioNS+".svc", token, newCSR(t))
			require.NoError(t, err)
			chain := parseChain(t, chainPEM)
			// istiod answers the leaf, cert-chain.pem's certificates, then
			// root-cert.pem, one certificate a string: the root comes twice.
			require.Len(t, chainPEM, 4, "leaf, intermediate, root, root")
			require.Len(t, chain, 4, "one certificate a string")
			leaf := chain[0]

			want := fmt.Sprintf("spiffe://%s/ns/%s/sa/app", p.trustDomain, p.workloadNS)
			require.Len(t, leaf.URIs, 1)
			require.Equal(t, want, leaf.URIs[0].String())
			require.True(t, chain[1].Equal(p.inter.cert), "the chain's intermediate is this revision's")
			require.True(t, chain[2].Equal(root.cert), "cert-chain.pem ends with the root")
			require.True(t, chain[3].Equal(root.cert), "root-cert.pem last")

			inters := x509.NewCertPool()
			inters.AddCert(p.inter.cert)
			_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, Intermediates: inters,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			require.NoError(t, err, "the leaf chains to the intermediate and the root (name constraint enforced by Go)")
			for _, other := range planes {
				if other != p {
					require.Error(t, leaf.CheckSignatureFrom(other.inter.cert), "not signed by %s's intermediate", other.rev)
				}
			}
			// istiod's namespace controller publishes the root in the
			// namespaces its discovery selectors select.
			require.NoError(t, pollUntil(ctx, time.Minute, func() error {
				data, err := rootCertConfigMap(ctx, c, p.workloadNS)
				if err != nil {
					return err
				}
				if data != string(root.certPEM) {
					return fmt.Errorf("istio-ca-root-cert in %s holds %q", p.workloadNS, data)
				}
				return nil
			}))
			t.Logf("%s: %s, issuer %q, valid until %s", p.rev, want, leaf.Issuer.CommonName, leaf.NotAfter.Format(time.RFC3339))
		})
	}
	// What istiod checks is the token, not the discovery selectors: a
	// ServiceAccount of lc2's namespace gets an identity in lc1's trust
	// domain from lc1's istiod (docs/mesh.md: only network policy on
	// 15012 keeps it out). A token for another audience is refused.
	lc1, lc2 := planes[0], planes[1]
	token, err := ServiceAccountToken(ctx, c, lc2.workloadNS, "app", "istio-ca")
	require.NoError(t, err)
	chainPEM, err := RequestCertificate(ctx, lc1.istiod.SecureGRPCAddr, roots, "istiod-lc1.lc1-istio-system.svc", token, newCSR(t))
	require.NoError(t, err)
	leaf := parseChain(t, chainPEM)[0]
	require.Equal(t, "spiffe://lc1.p1.dcm.local/ns/lc2-ns/sa/app", leaf.URIs[0].String())
	token, err = ServiceAccountToken(ctx, c, lc1.workloadNS, "app", "https://kubernetes.default.svc")
	require.NoError(t, err)
	_, err = RequestCertificate(ctx, lc1.istiod.SecureGRPCAddr, roots, "istiod-lc1.lc1-istio-system.svc", token, newCSR(t))
	require.Equal(t, codes.Unauthenticated, status.Code(err), "a token without audience istio-ca: %v", err)
	t.Logf("token of the API server's audience: %v", err)

	// Only then: a namespace neither logical cloud selects has none.
	_, err = rootCertConfigMap(ctx, c, "default")
	require.ErrorContains(t, err, "404", "istio-ca-root-cert in a namespace no discovery selector selects")

	t.Run("rotation", func(t *testing.T) {
		// The Secret changes as cadist's bundle does (issue 17): a new
		// intermediate under the same root; a new root, trusted beside the
		// old one during the overlap; the old root dropped. After each,
		// lc1's istiod reloads the files and signs with the new
		// intermediate, and publishes the root bundle.
		root2 := newTestCA(t, nil, "")
		inter2 := newTestCA(t, root, lc1.trustDomain)
		inter3 := newTestCA(t, root2, lc1.trustDomain)
		both := x509.NewCertPool()
		both.AddCert(root.cert)
		both.AddCert(root2.cert)
		steps := []struct {
			name          string
			inter, parent *testCA
			roots         []*testCA
		}{
			{"new intermediate", inter2, root, []*testCA{root}},
			{"new root, overlap", inter3, root2, []*testCA{root, root2}},
			{"old root dropped", inter3, root2, []*testCA{root2}},
		}
		for _, step := range steps {
			b, err := json.Marshal(cacertsSecret(lc1.istioNS, step.inter, step.parent, step.roots...))
			require.NoError(t, err)
			_, err = Apply(ctx, c, b)
			require.NoError(t, err)
			start := time.Now()
			require.NoError(t, lc1.istiod.ReloadCACerts(ctx, c))
			var published string
			for _, r := range step.roots {
				published += string(r.certPEM)
			}
			err = pollUntil(ctx, time.Minute, func() error {
				token, err := ServiceAccountToken(ctx, c, lc1.workloadNS, "app", "istio-ca")
				if err != nil {
					return err
				}
				chainPEM, err := RequestCertificate(ctx, lc1.istiod.SecureGRPCAddr, both,
					"istiod-lc1.lc1-istio-system.svc", token, newCSR(t))
				if err != nil {
					return err
				}
				chain := parseChain(t, chainPEM)
				if !chain[1].Equal(step.inter.cert) {
					return fmt.Errorf("%s: still issued by %q (serial %s)", step.name, chain[1].Subject.CommonName, chain[1].SerialNumber)
				}
				inters := x509.NewCertPool()
				inters.AddCert(step.inter.cert)
				only := x509.NewCertPool()
				only.AddCert(step.parent.cert)
				if _, err := chain[0].Verify(x509.VerifyOptions{Roots: only, Intermediates: inters,
					KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
					return fmt.Errorf("%s: %w", step.name, err)
				}
				data, err := rootCertConfigMap(ctx, c, lc1.workloadNS)
				if err != nil {
					return err
				}
				if data != published {
					return fmt.Errorf("%s: istio-ca-root-cert has %d certificates, not the %d roots", step.name,
						len(parseChain(t, []string{data})), len(step.roots))
				}
				return nil
			})
			require.NoError(t, err, step.name)
			t.Logf("%s: lc1 signs with the intermediate of serial %x and publishes %d root(s) %s after the files changed",
				step.name, step.inter.cert.SerialNumber, len(step.roots), time.Since(start).Round(10*time.Millisecond))
		}
	})
}

// rootCertConfigMap is root-cert.pem of the ConfigMap istio-ca-root-cert in
// namespace ns.
func rootCertConfigMap(ctx context.Context, c *kubetest.Cluster, ns string) (string, error) {
	client, err := c.HTTPClient()
	if err != nil {
		return "", err
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	err = getJSON(ctx, client, c.Server+"/api/v1/namespaces/"+ns+"/configmaps/istio-ca-root-cert", &cm)
	return cm.Data["root-cert.pem"], err
}

// applyControlPlaneFixtures writes by hand what DCM's rollouts will apply
// for one control plane: the istio namespace and a workload namespace
// (labelled for the discovery selectors), a ServiceAccount app, the cacerts
// Secret and the istio-<rev> mesh ConfigMap. istiod runs with the admin
// kubeconfig, so no RBAC is needed here.
func applyControlPlaneFixtures(ctx context.Context, t *testing.T, c *kubetest.Cluster, rev, trustDomain, istioNS, workloadNS string, root, inter *testCA) {
	t.Helper()
	labels := map[string]string{"dcm.io/project": "p1", "dcm.io/logical-cloud": rev}
	meshConfig := fmt.Sprintf("trustDomain: %s\ndiscoverySelectors:\n- matchLabels:\n    dcm.io/project: p1\n    dcm.io/logical-cloud: %s\n", trustDomain, rev)
	objs := []map[string]any{
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": istioNS, "labels": labels}},
		{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": workloadNS, "labels": labels}},
		{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "app", "namespace": workloadNS}},
		cacertsSecret(istioNS, inter, root, root),
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "istio-" + rev, "namespace": istioNS},
			"data": map[string]string{"mesh": meshConfig}},
	}
	for _, obj := range objs {
		b, err := json.Marshal(obj)
		require.NoError(t, err)
		_, err = Apply(ctx, c, b)
		require.NoError(t, err)
	}
}

// cacertsSecret is the Secret istiod loads its CA from: inter signed by
// parent; root-cert.pem holds roots (one, or two during a root's overlap).
func cacertsSecret(istioNS string, inter, parent *testCA, roots ...*testCA) map[string]any {
	var rootPEM string
	for _, r := range roots {
		rootPEM += string(r.certPEM)
	}
	return map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "cacerts", "namespace": istioNS},
		"stringData": map[string]string{
			"ca-cert.pem":    string(inter.certPEM),
			"ca-key.pem":     string(inter.keyPEM),
			"cert-chain.pem": string(inter.certPEM) + string(parent.certPEM),
			"root-cert.pem":  rootPEM,
		}}
}

// testCA is a root (parent nil) or an intermediate constrained to a trust
// domain, as cadist will issue them (docs/mesh.md section 4): P-256, CA,
// no EKU; the intermediate has MaxPathLen 0 and a critical URI name
// constraint.
type testCA struct {
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
	certPEM, keyPEM []byte
}

func newTestCA(t *testing.T, parent *testCA, trustDomain string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"dcm-test"}, CommonName: "dcm test root"},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(48 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		tmpl.Subject.CommonName = "dcm test intermediate " + trustDomain
		tmpl.NotAfter = time.Now().Add(24 * time.Hour)
		tmpl.MaxPathLen, tmpl.MaxPathLenZero = 0, true
		tmpl.PermittedURIDomains = []string{trustDomain}
		tmpl.PermittedDNSDomainsCritical = true
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return &testCA{
		cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// newCSR is a workload's CSR; istiod takes the identity from the token, not
// from the CSR.
func newCSR(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{Organization: []string{"dcm-test"}}}, key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

// parseChain parses the PEM strings istiod answers, each of which may hold
// several certificates.
func parseChain(t *testing.T, chainPEM []string) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	rest := []byte(strings.Join(chainPEM, ""))
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		certs = append(certs, cert)
	}
	return certs
}
