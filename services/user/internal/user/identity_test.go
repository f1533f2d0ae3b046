package user_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/services/user/internal/user"
)

// signedCSR makes a PEM certificate signing request for subject with key.
func signedCSR(t *testing.T, key crypto.Signer, subject pkix.Name) string {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: subject}, key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

func newKey(t *testing.T, make func() (crypto.Signer, error)) crypto.Signer {
	t.Helper()
	k, err := make()
	require.NoError(t, err)
	return k
}

func ecdsaOn(c elliptic.Curve) func() (crypto.Signer, error) {
	return func() (crypto.Signer, error) { return ecdsa.GenerateKey(c, rand.Reader) }
}

func rsaOf(bits int) func() (crypto.Signer, error) {
	return func() (crypto.Signer, error) { return rsa.GenerateKey(rand.Reader, bits) }
}

// TestCreateUserCSR: a CSR a user brings must ask for exactly the user's
// identity in its logical cloud, with a key strong enough and a good
// signature; a refusal is InvalidArgument naming user.certificate, says
// which subject DCM expects, and stores nothing.
func TestCreateUserCSR(t *testing.T) {
	t.Parallel()
	c, core := serve(t)
	ctx := context.Background()
	core.Add("ta", "lc", kube.LevelStandard, "ns-ta")
	create := func(name, csr string) error {
		_, err := c.CreateUser(ctx, &userv1.CreateUserRequest{Project: "ta", LogicalCloud: "lc", User: &userv1.User{Name: name, Certificate: csr}})
		return err
	}
	get := func(name string) (*userv1.User, error) {
		r, err := c.GetUser(ctx, &userv1.GetUserRequest{Project: "ta", LogicalCloud: "lc", Name: name})
		return r.GetUser(), err
	}
	bob := pkix.Name{CommonName: "dcm:ta:lc:bob", Organization: []string{"dcm:ta:lc"}}
	p256 := newKey(t, ecdsaOn(elliptic.P256()))
	good := signedCSR(t, p256, bob)
	tampered, _ := pem.Decode([]byte(good))
	tampered.Bytes[len(tampered.Bytes)-5] ^= 0xff
	subject := "user.certificate: the CSR's subject must be CN=dcm:ta:lc:bob, O=dcm:ta:lc; it has "
	key := "user.certificate: the certificate signing request's key is %s: use an RSA key of at least 2048 bits or an ECDSA key on P-256 or P-384"
	for _, bad := range []struct{ name, csr, message string }{
		{"O=system:masters", signedCSR(t, p256, pkix.Name{CommonName: "dcm:ta:lc:bob", Organization: []string{"system:masters"}}),
			subject + `O=system:masters (names starting with "system:" are Kubernetes' own)`},
		{"an extra O", signedCSR(t, p256, pkix.Name{CommonName: "dcm:ta:lc:bob", Organization: []string{"dcm:ta:lc", "dcm:ta:lc2"}}),
			subject + "O=dcm:ta:lc, O=dcm:ta:lc2"},
		{"wrong CN", signedCSR(t, p256, pkix.Name{CommonName: "dcm:ta:lc:alice", Organization: []string{"dcm:ta:lc"}}),
			subject + "CN=dcm:ta:lc:alice"},
		{"CN the plain user name", signedCSR(t, p256, pkix.Name{CommonName: "bob", Organization: []string{"dcm:ta:lc"}}),
			subject + "CN=bob"},
		{"another project's identity", signedCSR(t, p256, pkix.Name{CommonName: "dcm:tb:lc:bob", Organization: []string{"dcm:tb:lc"}}),
			subject + "CN=dcm:tb:lc:bob, O=dcm:tb:lc"},
		{"an OU", signedCSR(t, p256, pkix.Name{CommonName: "dcm:ta:lc:bob", Organization: []string{"dcm:ta:lc"}, OrganizationalUnit: []string{"x"}}),
			subject + "OU=x"},
		{"RSA-1024", signedCSR(t, newKey(t, rsaOf(1024)), bob), fmt.Sprintf(key, "RSA of 1024 bits")},
		{"Ed25519", signedCSR(t, newKey(t, func() (crypto.Signer, error) {
			_, k, err := ed25519.GenerateKey(rand.Reader)
			return k, err
		}), bob), fmt.Sprintf(key, "Ed25519")},
		{"P-521", signedCSR(t, newKey(t, ecdsaOn(elliptic.P521())), bob), fmt.Sprintf(key, "ECDSA on P-521")},
		{"a bad signature", string(pem.EncodeToMemory(tampered)), "user.certificate: the certificate signing request's signature does not verify"},
		{"two PEM blocks", good + good, "user.certificate: must be one PEM certificate signing request: there is more after its END line"},
	} {
		err := create("bob", bad.csr)
		st := status.Convert(err)
		require.Equal(t, codes.InvalidArgument, st.Code(), "%s: %v", bad.name, err)
		require.Equal(t, "user.certificate", errs.FieldOf(st), bad.name)
		require.Equal(t, bad.message, st.Message(), bad.name)
		_, err = get("bob")
		require.Equal(t, codes.NotFound, status.Code(err), "%s: nothing is stored", bad.name)
	}

	for name, key := range map[string]crypto.Signer{
		"carol": newKey(t, rsaOf(2048)),
		"dan":   newKey(t, ecdsaOn(elliptic.P384())),
		"erin":  p256,
	} {
		cn, group := kube.UserIdentity("ta", "lc", name)
		csr := signedCSR(t, key, pkix.Name{CommonName: cn, Organization: []string{group}})
		require.NoError(t, create(name, csr), name)
		u, err := get(name)
		require.NoError(t, err)
		require.Equal(t, csr, u.GetCertificate(), name)
	}
	// A refused CSR leaves an existing user as it was.
	before, err := get("carol")
	require.NoError(t, err)
	require.Equal(t, codes.AlreadyExists, status.Code(create("carol", signedCSR(t, p256, pkix.Name{CommonName: "dcm:ta:lc:carol", Organization: []string{"dcm:ta:lc"}}))))
	require.Equal(t, codes.InvalidArgument, status.Code(create("carol", good)))
	after, err := get("carol")
	require.NoError(t, err)
	require.True(t, proto.Equal(before, after))
}

// TestRenderRenewsOldCSR: users stored before DCM scoped identities. One
// whose key and CSR (CN the user name, O the logical cloud) the service
// made gets, at the next render, a CSR with the new subject and the same
// public key, stored once; one who brought such a CSR is left out of the
// render (its key is not here) and its credentials say why.
func TestRenderRenewsOldCSR(t *testing.T) {
	t.Parallel()
	c, core, st := serveStore(t)
	ctx := context.Background()
	core.Add("p", "lc", kube.LevelStandard, "ns-1")
	users := store.NewRecords(st, "users", "user", func() *userv1.User { return &userv1.User{} })
	parent := store.Key("p", "lc")
	// As the user service stored them before: kube.NewCSR(user, lc).
	oldCSR, keyPEM, err := kube.NewCSR("alice", "lc")
	require.NoError(t, err)
	require.NoError(t, users.Create(ctx, store.Key(parent, "alice"), parent,
		&userv1.User{Name: "alice", Type: "certificate", Certificate: string(oldCSR)}, store.Secret{Name: user.KeySecret, Value: keyPEM}))
	broughtCSR, _, err := kube.NewCSR("carol", "lc")
	require.NoError(t, err)
	require.NoError(t, users.Create(ctx, store.Key(parent, "carol"), parent,
		&userv1.User{Name: "carol", Type: "certificate", Certificate: string(broughtCSR)}))
	_, err = c.CreateUserPermission(ctx, &userv1.CreateUserPermissionRequest{Project: "p", LogicalCloud: "lc", UserPermission: &userv1.UserPermission{
		PermissionName: "pods", ApiGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}})
	require.NoError(t, err)

	_, err = c.GetUserCredentials(ctx, &userv1.GetUserCredentialsRequest{Project: "p", LogicalCloud: "lc", Name: "alice"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Equal(t, `user "alice" has no certificate for its identity yet: the logical cloud's next update (POST .../update) makes and applies its new certificate signing request`,
		status.Convert(err).Message(), "before the render that makes it again")

	render := func() *userv1.RenderUsersResponse {
		r, err := c.RenderUsers(ctx, &userv1.RenderUsersRequest{Project: "p", LogicalCloud: "lc"})
		require.NoError(t, err)
		return r
	}
	r := render()
	require.Equal(t, []string{"CertificateSigningRequest dcm.p.lc.alice", "Role ns-1/pods", "RoleBinding ns-1/pods"}, outline(t, "p", "lc", r.GetManifests()))
	require.Equal(t, []map[string]string{{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "dcm:p:lc:alice"}}, decode(t, r.GetManifests()[2]).Subjects,
		"carol's old CSR is not sent, so she is bound to nothing")

	renewed := string(decode(t, r.GetManifests()[0]).Spec.Request)
	require.NotEqual(t, string(oldCSR), renewed)
	require.NoError(t, kube.CheckCSR("c", renewed, "p", "lc", "alice"))
	require.Equal(t, "CN=dcm:p:lc:alice,O=dcm:p:lc", parseCSR(t, renewed).Subject.String())
	require.True(t, parseCSR(t, renewed).PublicKey.(*ecdsa.PublicKey).Equal(parseCSR(t, string(oldCSR)).PublicKey), "the same key")
	alice, err := c.GetUser(ctx, &userv1.GetUserRequest{Project: "p", LogicalCloud: "lc", Name: "alice"})
	require.NoError(t, err)
	require.Equal(t, renewed, alice.GetUser().GetCertificate(), "stored, and shown")
	creds, err := c.GetUserCredentials(ctx, &userv1.GetUserCredentialsRequest{Project: "p", LogicalCloud: "lc", Name: "alice"})
	require.NoError(t, err)
	require.Equal(t, keyPEM, creds.GetKeyPem(), "the key is kept")
	require.Equal(t, "dcm.p.lc.alice", creds.GetUser().GetCsrName())
	require.Equal(t, r.GetManifests(), render().GetManifests(), "made once: the next render is byte-identical")

	carol, err := c.GetUser(ctx, &userv1.GetUserRequest{Project: "p", LogicalCloud: "lc", Name: "carol"})
	require.NoError(t, err)
	require.Equal(t, string(broughtCSR), carol.GetUser().GetCertificate(), "a brought CSR is never replaced")
	_, err = c.GetUserCredentials(ctx, &userv1.GetUserCredentialsRequest{Project: "p", LogicalCloud: "lc", Name: "carol"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.Equal(t, `user "carol" has no certificate on the clusters: its certificate signing request, brought before DCM scoped user identities, is not sent to them `+
		`(certificate: the CSR's subject must be CN=dcm:p:lc:carol, O=dcm:p:lc; it has CN=carol, O=lc)`, status.Convert(err).Message())
}
