package kube_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dcm-project/dcm/platform/kube"
)

func TestUserIdentity(t *testing.T) {
	t.Parallel()
	cn, group := kube.UserIdentity("ta", "lc", "bob")
	require.Equal(t, "dcm:ta:lc:bob", cn)
	require.Equal(t, "dcm:ta:lc", group)
	require.Equal(t, group, kube.LogicalCloudGroup("ta", "lc"))

	// Project "team" with logical cloud "x-prod" and project "team-x" with
	// "prod" were both "dcm-team-x-prod-u" before; now nothing is shared.
	cn1, g1 := kube.UserIdentity("team", "x-prod", "u")
	cn2, g2 := kube.UserIdentity("team-x", "prod", "u")
	require.Equal(t, []string{"dcm:team:x-prod:u", "dcm:team:x-prod", "dcm.team.x-prod.u", "dcm.team.x-prod.u"},
		[]string{cn1, g1, kube.CSRName("team", "x-prod", "u"), kube.SharedName("team", "x-prod", "u")})
	require.Equal(t, []string{"dcm:team-x:prod:u", "dcm:team-x:prod", "dcm.team-x.prod.u", "dcm.team-x.prod.u"},
		[]string{cn2, g2, kube.CSRName("team-x", "prod", "u"), kube.SharedName("team-x", "prod", "u")})

	p, lc, u, ok := kube.ParseUserIdentity(cn2)
	require.True(t, ok)
	require.Equal(t, []string{"team-x", "prod", "u"}, []string{p, lc, u})
	for _, bad := range []string{"u", "dcm:team:u", "dcm:team:x:u:v", "system:team:x:u", "dcm:Team:x:u", "dcm::x:u"} {
		_, _, _, ok := kube.ParseUserIdentity(bad)
		require.False(t, ok, bad)
	}
}

// TestSharedNameIsValid: the longest names (three 63-character labels) are
// valid names for every kind DCM names with SharedName, by Kubernetes' own
// rules: a DNS subdomain (CSRs) and a path segment (RBAC objects).
func TestSharedNameIsValid(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 62) + "z"
	for _, name := range []string{kube.SharedName(long, long, long), kube.SharedName("p", "lc", "u"), kube.SharedName("a-1", "0", "x-y")} {
		require.Empty(t, validation.IsDNS1123Subdomain(name), name)
		require.Empty(t, content.IsPathSegmentName(name), name)
	}
	require.Len(t, kube.SharedName(long, long, long), 3+3+3*63)
}

// csrWith makes a PEM certificate signing request for subject with key.
func csrWith(t *testing.T, key crypto.Signer, subject pkix.Name) string {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

func ecKey(t *testing.T, c elliptic.Curve) crypto.Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	require.NoError(t, err)
	return k
}

func rsaKey(t *testing.T, bits int) crypto.Signer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	require.NoError(t, err)
	return k
}

// TestCheckCSR: the subject is exactly DCM's identity of the user, the key
// strong enough, the signature good; each refusal names the field and says
// what DCM expects.
func TestCheckCSR(t *testing.T) {
	t.Parallel()
	const field = "user.certificate"
	bob := pkix.Name{CommonName: "dcm:ta:lc:bob", Organization: []string{"dcm:ta:lc"}}
	p256 := ecKey(t, elliptic.P256())
	good := csrWith(t, p256, bob)
	for name, csr := range map[string]string{
		"P-256":    good,
		"P-384":    csrWith(t, ecKey(t, elliptic.P384()), bob),
		"RSA-2048": csrWith(t, rsaKey(t, 2048), bob),
		"NewCSR": func() string {
			c, _, err := kube.NewCSR(kube.UserIdentity("ta", "lc", "bob"))
			require.NoError(t, err)
			return string(c)
		}(),
		"trailing newlines": good + "\n\n",
	} {
		require.NoError(t, kube.CheckCSR(field, csr, "ta", "lc", "bob"), name)
	}

	tampered, _ := pem.Decode([]byte(good))
	tampered.Bytes[len(tampered.Bytes)-5] ^= 0xff
	expect := "user.certificate: the CSR's subject must be CN=dcm:ta:lc:bob, O=dcm:ta:lc; it has "
	for _, c := range []struct {
		name, csr, message string
	}{
		{"O=system:masters", csrWith(t, p256, pkix.Name{CommonName: "dcm:ta:lc:bob", Organization: []string{"system:masters"}}),
			expect + `O=system:masters (names starting with "system:" are Kubernetes' own)`},
		{"system: CN", csrWith(t, p256, pkix.Name{CommonName: "system:admin", Organization: []string{"dcm:ta:lc"}}),
			expect + `CN=system:admin (names starting with "system:" are Kubernetes' own)`},
		{"extra O", csrWith(t, p256, pkix.Name{CommonName: "dcm:ta:lc:bob", Organization: []string{"dcm:ta:lc", "dcm:ta:other"}}),
			expect + "O=dcm:ta:lc, O=dcm:ta:other"},
		{"no O", csrWith(t, p256, pkix.Name{CommonName: "dcm:ta:lc:bob"}), expect + "no O"},
		{"OU", csrWith(t, p256, pkix.Name{CommonName: "dcm:ta:lc:bob", Organization: []string{"dcm:ta:lc"}, OrganizationalUnit: []string{"ops"}}),
			expect + "OU=ops"},
		{"wrong CN", csrWith(t, p256, pkix.Name{CommonName: "dcm:tb:lc:bob", Organization: []string{"dcm:ta:lc"}}), expect + "CN=dcm:tb:lc:bob"},
		{"CN the plain user name", csrWith(t, p256, pkix.Name{CommonName: "bob", Organization: []string{"lc"}}), expect + "CN=bob, O=lc"},
		{"another project's user", csrWith(t, p256, pkix.Name{CommonName: "dcm:tb:lc:bob", Organization: []string{"dcm:tb:lc"}}),
			expect + "CN=dcm:tb:lc:bob, O=dcm:tb:lc"},
		{"RSA-1024", csrWith(t, rsaKey(t, 1024), bob),
			"user.certificate: the certificate signing request's key is RSA of 1024 bits: use an RSA key of at least 2048 bits or an ECDSA key on P-256 or P-384"},
		{"Ed25519", func() string {
			_, k, err := ed25519.GenerateKey(rand.Reader)
			require.NoError(t, err)
			return csrWith(t, k, bob)
		}(), "user.certificate: the certificate signing request's key is Ed25519: use an RSA key of at least 2048 bits or an ECDSA key on P-256 or P-384"},
		{"P-521", csrWith(t, ecKey(t, elliptic.P521()), bob),
			"user.certificate: the certificate signing request's key is ECDSA on P-521: use an RSA key of at least 2048 bits or an ECDSA key on P-256 or P-384"},
		{"P-224", csrWith(t, ecKey(t, elliptic.P224()), bob),
			"user.certificate: the certificate signing request's key is ECDSA on P-224: use an RSA key of at least 2048 bits or an ECDSA key on P-256 or P-384"},
		{"bad signature", string(pem.EncodeToMemory(tampered)), "user.certificate: the certificate signing request's signature does not verify"},
		{"two PEM blocks", good + good, "user.certificate: must be one PEM certificate signing request: there is more after its END line"},
		{"trailing text", good + "trailing", "user.certificate: must be one PEM certificate signing request: there is more after its END line"},
		{"a file path", "/path/to/user1.csr", "user.certificate: must be one PEM certificate signing request (its text, not a file path)"},
		{"a certificate", strings.ReplaceAll(good, "CERTIFICATE REQUEST", "CERTIFICATE"),
			"user.certificate: must be one PEM certificate signing request (its text, not a file path)"},
	} {
		err := kube.CheckCSR(field, c.csr, "ta", "lc", "bob")
		require.Equal(t, field, fieldOf(t, err), c.name)
		require.Equal(t, c.message, err.Error(), c.name)
	}
}

// TestSignCSR: a CSR made again with an existing key has the new subject
// and the same public key.
func TestSignCSR(t *testing.T) {
	t.Parallel()
	old, keyPEM, err := kube.NewCSR("bob", "lc")
	require.NoError(t, err)
	block, _ := pem.Decode(keyPEM)
	require.Equal(t, "PRIVATE KEY", block.Type)
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	renewed, err := kube.SignCSR(key.(crypto.Signer), "dcm:ta:lc:bob", "dcm:ta:lc")
	require.NoError(t, err)
	require.NoError(t, kube.CheckCSR("c", string(renewed), "ta", "lc", "bob"))
	parse := func(p []byte) *x509.CertificateRequest {
		b, _ := pem.Decode(p)
		r, err := x509.ParseCertificateRequest(b.Bytes)
		require.NoError(t, err)
		return r
	}
	require.True(t, parse(old).PublicKey.(*ecdsa.PublicKey).Equal(parse(renewed).PublicKey))
}

func TestCSRManifest(t *testing.T) {
	t.Parallel()
	csr, _, err := kube.NewCSR(kube.UserIdentity("p", "lc", "u"))
	require.NoError(t, err)
	type manifest struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name   string            `json:"name"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			Request           []byte   `json:"request"`
			SignerName        string   `json:"signerName"`
			Usages            []string `json:"usages"`
			ExpirationSeconds *int64   `json:"expirationSeconds"`
		} `json:"spec"`
	}
	var m manifest
	require.NoError(t, json.Unmarshal([]byte(kube.CSRManifest("dcm.p.lc.u", csr, kube.Labels("p", "lc"))), &m))
	require.Equal(t, "CertificateSigningRequest", m.Kind)
	require.Equal(t, "dcm.p.lc.u", m.Metadata.Name)
	require.Equal(t, map[string]string{"dcm.io/project": "p", "dcm.io/logical-cloud": "lc"}, m.Metadata.Labels)
	require.Equal(t, csr, m.Spec.Request)
	require.Equal(t, "kubernetes.io/kube-apiserver-client", m.Spec.SignerName)
	require.Equal(t, []string{"client auth"}, m.Spec.Usages)
	require.Nil(t, m.Spec.ExpirationSeconds, "no lifetime asked: the signer's maximum")

	week := kube.CSRManifestWithLifetime("n", []byte("CSR"), nil, 168*time.Hour)
	require.Equal(t, `{"apiVersion":"certificates.k8s.io/v1","kind":"CertificateSigningRequest","metadata":{"name":"n"},`+
		`"spec":{"expirationSeconds":604800,"request":"Q1NS","signerName":"kubernetes.io/kube-apiserver-client","usages":["client auth"]}}`, week)
	require.Equal(t, week, kube.CSRManifestWithLifetime("n", []byte("CSR"), nil, 168*time.Hour), "byte-identical")
}

func TestCheckCertLifetime(t *testing.T) {
	t.Parallel()
	for _, ok := range []time.Duration{10 * time.Minute, 168 * time.Hour, 365 * 24 * time.Hour} {
		require.NoError(t, kube.CheckCertLifetime("DCM_CERT_LIFETIME", ok), ok)
	}
	for d, msg := range map[time.Duration]string{
		9 * time.Minute:              "DCM_CERT_LIFETIME: 9m0s is shorter than 10m0s, the shortest a cluster's signer issues",
		0:                            "DCM_CERT_LIFETIME: 0s is shorter than 10m0s",
		100 * 365 * 24 * time.Hour:   "DCM_CERT_LIFETIME: 876000h0m0s is longer than a CertificateSigningRequest can ask for",
		time.Hour + time.Millisecond: "DCM_CERT_LIFETIME: 1h0m0.001s is not a whole number of seconds",
	} {
		require.ErrorContains(t, kube.CheckCertLifetime("DCM_CERT_LIFETIME", d), msg)
	}
}
