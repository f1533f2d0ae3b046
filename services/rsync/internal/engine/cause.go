package engine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"regexp"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Cause is what a tenant is shown of a cluster's error (a resource's
// last-error, a read-back's message): the API server's answer (Forbidden,
// not found, a conflict with its manager, a refusal of the object), rsync's
// own refusals (managed by another owner) as they are, and for a cluster
// that cannot be reached only why ("unreachable: connection refused"),
// never the client's raw error with the API server's URL and address. Any
// address left in a text is replaced. The full error is for the log.
func Cause(err error) string {
	if err == nil {
		return ""
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		if why := transport(err); why != "" {
			return "unreachable: " + why
		}
	}
	return scrub(err.Error())
}

// transport says why a connection to a cluster failed, or "" if err is not
// a connection's.
func transport(err error) string {
	var (
		unknownCA *x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		header    tls.RecordHeaderError
		alert     tls.AlertError
		verify    *tls.CertificateVerificationError
		dns       *net.DNSError
		netErr    net.Error
		opErr     *net.OpError
	)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the API server"
	case errors.As(err, &unknownCA), errors.As(err, &verify):
		return "its certificate is not signed by the kubeconfig's certificate authority"
	case errors.As(err, &hostname):
		return "its certificate does not name its address"
	case errors.As(err, &invalid):
		return "its certificate is not valid"
	case errors.As(err, &header), errors.As(err, &alert):
		return "TLS handshake failed"
	case errors.As(err, &dns):
		return "its host name does not resolve"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.As(err, &opErr), errors.As(err, &netErr):
		return "connection failed"
	}
	return ""
}

// addresses are URLs, IPv4 and bracketed IPv6 addresses (with a port).
var addresses = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'\x60]+|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b|\[[0-9A-Fa-f:.]+(?:%[^\]]*)?\](?::\d+)?`)

// scrub replaces the addresses in a text.
func scrub(s string) string { return addresses.ReplaceAllString(s, "<address>") }
