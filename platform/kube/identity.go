package kube

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/pki"
)

// A logical cloud's users are Kubernetes identities of DCM's own, one per
// (project, logical cloud, user): DCM names every part, so that no two
// logical clouds, of one project or of two, ever share an identity or an
// object name on a cluster. Project, logical cloud and user names are DNS
// labels (a-z, 0-9 and '-'), so ':' and '.' cannot occur in them: joined
// with those, different triples give different strings.

// identityPrefix starts every identity and shared object name DCM makes.
const identityPrefix = "dcm"

// LogicalCloudGroup is the Kubernetes group of every certificate user of
// logical cloud lc of project: "dcm:<project>:<lc>", the one organization
// (O) of its users' certificates.
func LogicalCloudGroup(project, lc string) string {
	return identityPrefix + ":" + project + ":" + lc
}

// UserIdentity is the Kubernetes identity of certificate user user of
// logical cloud lc of project: the common name (CN) cn,
// "dcm:<project>:<lc>:<user>", which bindings name as their User subject,
// and its one group, LogicalCloudGroup. The user's name in DCM (REST,
// kubeconfig) stays user.
func UserIdentity(project, lc, user string) (cn, group string) {
	group = LogicalCloudGroup(project, lc)
	return group + ":" + user, group
}

// SharedName is the name of an object named name (a user's, a
// permission's) that logical cloud lc of project puts where other logical
// clouds' objects are too: cluster-scoped objects (CSRs, ClusterRoles and
// their bindings) and objects in a namespace not the logical cloud's own.
// It is "dcm.<project>.<lc>.<name>": '.' cannot occur in a DNS label, so no
// other (project, logical cloud, name) gives the same name, and it is a
// valid object name (a DNS subdomain of at most 4+3*63+3 = 196 characters,
// and a path segment).
func SharedName(project, lc, name string) string {
	return identityPrefix + "." + project + "." + lc + "." + name
}

// CSRName is the name of the CertificateSigningRequest of certificate user
// user of logical cloud lc of project: SharedName.
func CSRName(project, lc, user string) string { return SharedName(project, lc, user) }

// ParseUserIdentity reads a common name made by UserIdentity back into
// its project, logical cloud and user; ok is false for any other name.
func ParseUserIdentity(cn string) (project, lc, user string, ok bool) {
	parts := strings.Split(cn, ":")
	if len(parts) != 4 || parts[0] != identityPrefix {
		return "", "", "", false
	}
	for _, p := range parts[1:] {
		if len(validation.IsDNS1123Label(p)) > 0 {
			return "", "", "", false
		}
	}
	return parts[1], parts[2], parts[3], true
}

// MinCertLifetime is the shortest certificate lifetime a cluster's signer
// honours (spec.expirationSeconds); it raises shorter ones to it.
const MinCertLifetime = 10 * time.Minute

// CheckCertLifetime checks a certificate lifetime as configured (field
// names the setting): at least MinCertLifetime, and whole seconds that fit
// spec.expirationSeconds (an int32).
func CheckCertLifetime(field string, d time.Duration) error {
	switch {
	case d < MinCertLifetime:
		return fmt.Errorf("%s: %s is shorter than %s, the shortest a cluster's signer issues", field, d, MinCertLifetime)
	case d.Seconds() > math.MaxInt32:
		return fmt.Errorf("%s: %s is longer than a CertificateSigningRequest can ask for (%d seconds)", field, d, math.MaxInt32)
	case d%time.Second != 0:
		return fmt.Errorf("%s: %s is not a whole number of seconds", field, d)
	}
	return nil
}

// NewCSR makes a P-256 key and a certificate signing request for common
// name cn (a Kubernetes user) and organizations orgs (its groups); both
// are returned as PEM.
func NewCSR(cn string, orgs ...string) (csrPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	csrPEM, err = SignCSR(key, cn, orgs...)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = pki.KeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return csrPEM, keyPEM, nil
}

// SignCSR makes a PEM certificate signing request for common name cn and
// organizations orgs with an existing key: a user's CSR made again with a
// new subject keeps its public key.
func SignCSR(key crypto.Signer, cn string, orgs ...string) ([]byte, error) {
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: orgs}}, key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), nil
}

// CSRManifest is a CertificateSigningRequest object, as JSON, named name
// and labelled labels (nil: none), that asks a cluster's
// kube-apiserver-client signer for a client certificate for csrPEM, valid
// as long as the signer's own maximum (see CSRManifestWithLifetime).
func CSRManifest(name string, csrPEM []byte, labels map[string]string) string {
	return CSRManifestWithLifetime(name, csrPEM, labels, 0)
}

// CSRManifestWithLifetime is CSRManifest asking for a certificate valid
// for lifetime (spec.expirationSeconds, in whole seconds; the signer
// issues at least MinCertLifetime and at most its configured maximum); 0
// asks for nothing. The same input gives the same bytes.
func CSRManifestWithLifetime(name string, csrPEM []byte, labels map[string]string, lifetime time.Duration) string {
	spec := map[string]any{
		"request":    base64.StdEncoding.EncodeToString(csrPEM),
		"signerName": "kubernetes.io/kube-apiserver-client",
		"usages":     []string{"client auth"},
	}
	if lifetime > 0 {
		spec["expirationSeconds"] = int64(lifetime / time.Second)
	}
	return Manifest("certificates.k8s.io/v1", "CertificateSigningRequest", Meta{Name: name, Labels: labels}, map[string]any{"spec": spec})
}

// systemPrefix starts the names Kubernetes reserves for its own users and
// groups (system:masters is every cluster's superuser group).
const systemPrefix = "system:"

// CheckCSR checks a PEM certificate signing request brought for
// certificate user user of logical cloud lc of project (field names it in
// errors): exactly one CSR block; a subject of exactly the common name and
// the one organization of UserIdentity, and no other attribute (no OU, C,
// ...), no name starting with "system:"; an RSA key of at least 2048 bits
// or an ECDSA key on P-256 or P-384; a signature that verifies. The
// message of a wrong subject says which subject DCM expects.
func CheckCSR(field, pemText, project, lc, user string) error {
	csr, err := parseCSR(field, pemText)
	if err != nil {
		return err
	}
	if err := checkSubject(field, csr.Subject, project, lc, user); err != nil {
		return err
	}
	if err := checkKey(field, csr.PublicKey); err != nil {
		return err
	}
	if err := csr.CheckSignature(); err != nil {
		return errs.Invalid(field, "the certificate signing request's signature does not verify")
	}
	return nil
}

// parseCSR reads exactly one PEM certificate signing request.
func parseCSR(field, pemText string) (*x509.CertificateRequest, error) {
	block, rest := pem.Decode([]byte(pemText))
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, errs.Invalid(field, "must be one PEM certificate signing request (its text, not a file path)")
	}
	if strings.TrimSpace(string(rest)) != "" {
		return nil, errs.Invalid(field, "must be one PEM certificate signing request: there is more after its END line")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, errs.Invalid(field, "the certificate signing request does not parse: %v", err)
	}
	return csr, nil
}

var (
	oidCommonName   = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidOrganization = asn1.ObjectIdentifier{2, 5, 4, 10}
)

// attributeNames are the short names of the subject attributes people
// put in CSRs, for messages; others are shown by OID.
var attributeNames = map[string]string{
	"2.5.4.3": "CN", "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.6": "C", "2.5.4.7": "L",
	"2.5.4.8": "ST", "2.5.4.9": "STREET", "2.5.4.17": "POSTALCODE", "2.5.4.5": "SERIALNUMBER",
	"1.2.840.113549.1.9.1": "emailAddress",
}

// checkSubject requires the subject to be exactly CN=cn, O=group.
func checkSubject(field string, subject pkix.Name, project, lc, user string) error {
	cn, group := UserIdentity(project, lc, user)
	var cns, orgs, others []string
	for _, a := range subject.Names {
		value := fmt.Sprint(a.Value)
		switch {
		case a.Type.Equal(oidCommonName):
			cns = append(cns, value)
		case a.Type.Equal(oidOrganization):
			orgs = append(orgs, value)
		default:
			name, ok := attributeNames[a.Type.String()]
			if !ok {
				name = a.Type.String()
			}
			others = append(others, name+"="+value)
		}
	}
	var wrong []string
	if !slices.Equal(cns, []string{cn}) {
		wrong = append(wrong, listed("CN", cns))
	}
	if !slices.Equal(orgs, []string{group}) {
		wrong = append(wrong, listed("O", orgs))
	}
	wrong = append(wrong, others...)
	if len(wrong) == 0 {
		return nil
	}
	why := ""
	if slices.ContainsFunc(slices.Concat(cns, orgs), func(s string) bool { return strings.HasPrefix(s, systemPrefix) }) {
		why = " (names starting with \"system:\" are Kubernetes' own)"
	}
	return errs.Invalid(field, "the CSR's subject must be CN=%s, O=%s; it has %s%s", cn, group, strings.Join(wrong, ", "), why)
}

// listed writes values of attribute name as "O=a, O=b", or "no O".
func listed(name string, values []string) string {
	if len(values) == 0 {
		return "no " + name
	}
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = name + "=" + v
	}
	return strings.Join(out, ", ")
}

// checkKey allows the keys Kubernetes' and Go's TLS stacks handle
// everywhere and that are strong enough: RSA of 2048 bits or more, ECDSA on
// P-256 or P-384.
func checkKey(field string, key any) error {
	const want = "use an RSA key of at least 2048 bits or an ECDSA key on P-256 or P-384"
	switch k := key.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < 2048 {
			return errs.Invalid(field, "the certificate signing request's key is RSA of %d bits: %s", bits, want)
		}
		return nil
	case *ecdsa.PublicKey:
		if c := k.Curve; c != elliptic.P256() && c != elliptic.P384() {
			return errs.Invalid(field, "the certificate signing request's key is ECDSA on %s: %s", c.Params().Name, want)
		}
		return nil
	}
	return errs.Invalid(field, "the certificate signing request's key is %s: %s", keyKind(key), want)
}

func keyKind(key any) string {
	if _, ok := key.(ed25519.PublicKey); ok {
		return "Ed25519"
	}
	return "of an unknown algorithm"
}
