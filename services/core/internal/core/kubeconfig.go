package core

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/grpc/codes"
	"sigs.k8s.io/yaml"

	corev1 "github.com/dcm-project/dcm/gen/dcm/core/v1"
	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	userv1 "github.com/dcm-project/dcm/gen/dcm/user/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/logging"
)

// The states in which a logical cloud's objects may be on its clusters.
var liveStates = []string{StateInstantiating, StateInstantiated, StateInstantiateFailed, StatePaused}

// requireApplied refuses (FailedPrecondition) a logical cloud that is not
// on its clusters: what it would have there is named in the message.
func (s *rollouts) requireApplied(ctx context.Context, project, lc string, c *corev1.LogicalCloud, what string) error {
	st, err := s.status(ctx, project, lc, c)
	if err != nil {
		return err
	}
	if !slices.Contains(liveStates, st.GetState()) {
		return errs.Because(errs.ReasonWrongState, "logical cloud %q is %s: %s on the clusters once it is applied", lc, st.GetState(), what)
	}
	return nil
}

// Kubeconfigs are the kubeconfigs of a logical cloud's users on its
// clusters.
type Kubeconfigs struct {
	*cloudReader
	*rollouts
	references *References
	users      userv1.UserInternalServiceClient
	rsync      rsyncv1.RsyncInternalServiceClient
	log        *zap.Logger
	// TokenLifetime is the lifetime of the token in a token user's
	// kubeconfig; 0 leaves it to rsync (24 hours).
	tokenLifetime time.Duration
	// CertRenewPercent is the share of a user certificate's life after
	// which a kubeconfig read renews it (RsyncService/RenewCertificate).
	certRenewPercent int
}

// GetKubeconfig implements corev1.LogicalCloudServiceServer: a kubeconfig
// for a user of the logical cloud on one of its clusters. A certificate
// user gets the key the user service keeps and the certificate the
// cluster's signer issued; a token user the token of its ServiceAccount.
// The server address and CA are the cluster's, as the resource
// synchronizer knows them; the context is in the logical cloud's namespace.
func (s *Kubeconfigs) GetKubeconfig(ctx context.Context, req *corev1.GetKubeconfigRequest) (*httpbody.HttpBody, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	c, err := s.cloud(ctx, project, lc)
	if err != nil {
		return nil, err
	}
	if c.GetSpec().GetLevel() == levelAdmin {
		return nil, errs.FailedPrecondition("logical cloud %q is an admin logical cloud: it uses the clusters' own admin access, which is not handed out", lc)
	}
	provider, cluster := req.GetClusterProvider(), req.GetClusterName()
	if provider == "" {
		// .../cluster-references/{x}/kubeconfig: x is a reference's own
		// name, else a cluster's.
		if r, err := s.references.refByName(ctx, project, lc, cluster); err == nil {
			provider, cluster = r.GetClusterProvider(), r.GetClusterName()
		} else if errs.Code(err) != codes.NotFound {
			return nil, err
		}
	}
	t, err := s.findTarget(ctx, project, lc, c, provider, cluster)
	if err != nil {
		return nil, err
	}
	if err := s.requireApplied(ctx, project, lc, c, "its users have credentials"); err != nil {
		return nil, err
	}
	user := cmp.Or(req.GetUser(), c.GetSpec().GetUser().GetUserName())
	creds, err := s.users.GetUserCredentials(ctx, &userv1.GetUserCredentialsRequest{Project: project, LogicalCloud: lc, Name: user,
		Level: c.GetSpec().GetLevel(), Namespace: c.GetSpec().GetNamespace()})
	if err != nil {
		return nil, err
	}
	conn, err := s.rsync.GetClusterConnection(ctx, &rsyncv1.GetClusterConnectionRequest{Provider: t.provider, Cluster: t.cluster})
	if err != nil {
		return nil, err
	}
	auth := kubeconfigUser{}
	switch u := creds.GetUser(); u.GetType() {
	case userToken:
		tok, err := s.rsync.GetServiceAccountToken(ctx, &rsyncv1.GetServiceAccountTokenRequest{
			Provider: t.provider, Cluster: t.cluster, Namespace: u.GetNamespace(), ServiceAccount: u.GetServiceAccount(),
			ExpirationSeconds: int64(s.tokenLifetime / time.Second)})
		if err != nil {
			return nil, notYet(err, fmt.Sprintf("the token of user %q", user), t)
		}
		auth.Token = string(tok.GetToken())
	default:
		cert, err := s.certificate(ctx, project, lc, t, u.GetCsrName())
		if err != nil {
			return nil, notYet(err, fmt.Sprintf("the certificate of user %q", user), t)
		}
		auth.ClientCertificateData = cert
		auth.ClientKeyData = creds.GetKeyPem() // empty if the user brought its own request
	}
	name := lc + "-" + t.cluster
	cfg := kubeconfig{
		APIVersion: "v1", Kind: "Config", CurrentContext: name,
		Clusters: []namedCluster{{Name: t.provider + "-" + t.cluster, Cluster: kubeconfigCluster{
			Server: conn.GetServer(), CertificateAuthorityData: conn.GetCertificateAuthorityData(), TLSServerName: conn.GetTlsServerName()}}},
		Users: []namedUser{{Name: user, User: auth}},
		Contexts: []namedContext{{Name: name, Context: kubeconfigContext{
			Cluster: t.provider + "-" + t.cluster, User: user, Namespace: c.GetSpec().GetNamespace()}}},
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, errs.Internal(err, "write the kubeconfig")
	}
	return &httpbody.HttpBody{ContentType: "application/yaml", Data: out}, nil
}

// certificate is the certificate the cluster issued for a user's request,
// renewed first when more than CertRenewPercent of its life has passed: a
// kubeconfig read then always carries a certificate with at least the
// rest of its life ahead. A renewal that fails leaves the current
// certificate, still valid, in the kubeconfig (and a warning in the log).
func (s *Kubeconfigs) certificate(ctx context.Context, project, lc string, t target, csrName string) ([]byte, error) {
	got, err := s.rsync.GetCertificate(ctx, &rsyncv1.GetCertificateRequest{Provider: t.provider, Cluster: t.cluster, Name: csrName})
	if err != nil {
		return nil, err
	}
	cert := got.GetCertificate()
	if !renewDue(cert, s.certRenewPercent, time.Now()) {
		return cert, nil
	}
	fresh, err := s.rsync.RenewCertificate(ctx, &rsyncv1.RenewCertificateRequest{
		Owner: rolloutOwner(project, lc), Provider: t.provider, Cluster: t.cluster, Name: csrName})
	if err != nil {
		logging.FromOr(ctx, s.log).Warn("certificate renewal failed; the kubeconfig carries the current one",
			zap.String("logical_cloud", project+"/"+lc), zap.String("cluster", t.provider+"/"+t.cluster), zap.Error(err))
		return cert, nil
	}
	return fresh.GetCertificate(), nil
}

// renewDue reports whether more than percent of the life of the first
// certificate of chain has passed at now. An unreadable one is renewed.
func renewDue(chain []byte, percent int, now time.Time) bool {
	if percent <= 0 {
		percent = 50
	}
	block, _ := pem.Decode(chain)
	if block == nil {
		return true
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return true
	}
	life := c.NotAfter.Sub(c.NotBefore)
	return now.After(c.NotBefore.Add(life * time.Duration(percent) / 100))
}

// notYet turns a credential that a cluster has not made yet (the signer or
// token controller is behind, or the cluster is down) into a state the
// caller can wait out, naming what and where.
func notYet(err error, what string, t target) error {
	switch errs.Code(err) {
	case codes.NotFound, codes.FailedPrecondition:
		return errs.Because(errs.ReasonNotIssued, "%s is not issued on cluster %s/%s yet: see .../status", what, t.provider, t.cluster)
	}
	return err
}

// findTarget finds a cluster among the logical cloud's; the provider may be
// left out when the cluster's name is unambiguous.
func (s *Kubeconfigs) findTarget(ctx context.Context, project, lc string, c *corev1.LogicalCloud, provider, cluster string) (target, error) {
	targets, err := s.references.targets(ctx, project, lc, c)
	if err != nil {
		return target{}, err
	}
	var found []target
	for _, t := range targets {
		if t.cluster == cluster && (provider == "" || t.provider == provider) {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 0:
		if provider != "" {
			cluster = provider + "/" + cluster
		}
		return target{}, errs.NotFound("cluster %q is not in logical cloud %q", cluster, lc)
	case 1:
		return found[0], nil
	}
	return target{}, errs.Invalid("cluster-provider", "cluster %q of logical cloud %q is under several providers: use .../cluster-providers/{provider}/cluster-references/%s/kubeconfig", cluster, lc, cluster)
}

// kubeconfig is the part of client-go's kubeconfig format written here.
type kubeconfig struct {
	APIVersion     string         `json:"apiVersion"`
	Kind           string         `json:"kind"`
	Clusters       []namedCluster `json:"clusters"`
	Users          []namedUser    `json:"users"`
	Contexts       []namedContext `json:"contexts"`
	CurrentContext string         `json:"current-context"`
}

type namedCluster struct {
	Name    string            `json:"name"`
	Cluster kubeconfigCluster `json:"cluster"`
}

type kubeconfigCluster struct {
	Server                   string `json:"server"`
	CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
	TLSServerName            string `json:"tls-server-name,omitempty"`
}

type namedUser struct {
	Name string         `json:"name"`
	User kubeconfigUser `json:"user"`
}

type kubeconfigUser struct {
	ClientCertificateData []byte `json:"client-certificate-data,omitempty"`
	ClientKeyData         []byte `json:"client-key-data,omitempty"`
	Token                 string `json:"token,omitempty"`
}

type namedContext struct {
	Name    string            `json:"name"`
	Context kubeconfigContext `json:"context"`
}

type kubeconfigContext struct {
	Cluster   string `json:"cluster"`
	User      string `json:"user"`
	Namespace string `json:"namespace,omitempty"`
}
