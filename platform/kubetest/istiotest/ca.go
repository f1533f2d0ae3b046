package istiotest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	securityv1alpha1 "istio.io/api/security/v1alpha1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/dcm-project/dcm/platform/kubetest"
)

// RequestCertificate asks istiod's CA at addr (its SecureGRPCAddr) to sign
// csrPEM, authenticated by token (a ServiceAccount token of audience
// istio-ca, see ServiceAccountToken), as a workload's istio-agent does:
// istio.v1.auth.IstioCertificateService/CreateCertificate over TLS,
// verifying istiod's serving certificate against roots with serverName
// (istiod-<revision>.<namespace>.svc). It returns the PEM chain istiod
// answers: the leaf, the cacerts Secret's cert-chain.pem certificates, then
// root-cert.pem.
func RequestCertificate(ctx context.Context, addr string, roots *x509.CertPool, serverName, token string, csrPEM []byte) ([]string, error) {
	creds := credentials.NewTLS(&tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})
	// istiod is not a DCM peer (no service identity, no mutual TLS): a
	// workload's agent dials it with server TLS and a token, and so do we.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds)) //nolint:forbidigo // see above
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	resp, err := securityv1alpha1.NewIstioCertificateServiceClient(conn).CreateCertificate(ctx,
		&securityv1alpha1.IstioCertificateRequest{Csr: string(csrPEM), ValidityDuration: 3600})
	if err != nil {
		return nil, fmt.Errorf("CreateCertificate at %s: %w", addr, err)
	}
	return resp.GetCertChain(), nil
}

// ServiceAccountToken asks the cluster's TokenRequest API (with the admin
// credential) for a 10-minute token of ServiceAccount namespace/name with
// the given audience ("istio-ca" for istiod's CA).
func ServiceAccountToken(ctx context.Context, c *kubetest.Cluster, namespace, name, audience string) (string, error) {
	client, err := c.HTTPClient()
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"spec": map[string]any{"audiences": []string{audience}, "expirationSeconds": 600},
	})
	if err != nil {
		return "", err
	}
	u := fmt.Sprintf("%s/api/v1/namespaces/%s/serviceaccounts/%s/token", c.Server, url.PathEscape(namespace), url.PathEscape(name))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	var tr struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := do(client, req, &tr); err != nil {
		return "", fmt.Errorf("token of %s/%s on %s: %w", namespace, name, c.Name, err)
	}
	return tr.Status.Token, nil
}
