package server

import (
	"context"
	"crypto/x509"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/dcm-project/dcm/platform/pki"
)

// The gRPC metadata keys that carry the identity of the REST caller a
// service acts for (pki.CallerPrefix). The gateway sets them; services
// pass them on to the services they call (platform/client); they count
// only from a service's certificate.
const (
	callerSubject = pki.CallerPrefix + "subject"
	callerRole    = pki.CallerPrefix + "role"
	callerProject = pki.CallerPrefix + "project"
)

// CallerMD is the metadata that tells the services who the REST caller is.
func CallerMD(id pki.Identity) metadata.MD {
	return metadata.Pairs(callerSubject, id.Subject, callerRole, id.Role, callerProject, id.Project)
}

type callerKey struct{}

type peerKey struct{}

// Peer is who holds the connection of a call: the identity its verified
// certificate carries (a service, or an operator with grpcurl). Caller is
// who the call acts for.
func Peer(ctx context.Context) pki.Identity {
	id, _ := ctx.Value(peerKey{}).(pki.Identity)
	return id
}

// Caller is who a request acts for: the REST caller the gateway
// authenticated (forwarded by a service), or else the peer's own
// certificate identity (an admin with grpcurl, or a service acting on its
// own). Without TLS (DCM_INSECURE_GRPC, development only) the peer is the
// program its call names (pki.InsecureProgramKey), once the allow-list let
// that name call the method.
func Caller(ctx context.Context) pki.Identity {
	if id, ok := ctx.Value(callerKey{}).(pki.Identity); ok {
		return id
	}
	return pki.Identity{Subject: "unknown"}
}

// MayGrant reports whether the caller may grant rights beyond a tenant's
// own namespace (levels admin and privileged, cluster-wide permissions,
// quotas over the installation's maximum): the admin role, or a service
// acting on its own.
func MayGrant(ctx context.Context) bool {
	r := Caller(ctx).Role
	return r == pki.RoleAdmin || r == pki.RoleService
}

// peerIdentity reads the verified client certificate of the call.
func peerIdentity(ctx context.Context) (pki.Identity, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return pki.Identity{}, false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return pki.Identity{}, false
	}
	return pki.IdentityOf(ti.State.VerifiedChains[0][0]), true
}

// peerChain is the verified chain of the call's client certificate, leaf
// first.
func peerChain(ctx context.Context) []*x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 {
		return nil
	}
	return ti.State.VerifiedChains[0]
}

// withCaller resolves Caller for a call from peer (who its certificate
// says, or on plaintext gRPC the program it names: insecurePeer): a
// service's forwarded caller wins; anyone else is the peer itself.
func withCaller(ctx context.Context, peerID pki.Identity) context.Context {
	id := peerID
	if id.Role == pki.RoleService {
		if fwd, ok := forwarded(ctx); ok {
			id = fwd
		}
	}
	return context.WithValue(context.WithValue(ctx, callerKey{}, id), peerKey{}, peerID)
}

// insecurePeer is who a plaintext call's peer says it is: the DCM program
// its metadata names (pki.InsecureProgramKey, the last value), with the
// role service; without a name, a service named "", which no allow-list
// names.
func insecurePeer(ctx context.Context) pki.Identity {
	md, _ := metadata.FromIncomingContext(ctx)
	name := ""
	if v := md.Get(pki.InsecureProgramKey); len(v) > 0 {
		name = strings.TrimSpace(v[len(v)-1])
	}
	return pki.Identity{Subject: name, Role: pki.RoleService}
}

// forwarded reads the caller metadata; the last value of each key counts,
// though the gateway never lets a client set them.
func forwarded(ctx context.Context) (pki.Identity, bool) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return pki.Identity{}, false
	}
	last := func(k string) string {
		v := md.Get(k)
		if len(v) == 0 {
			return ""
		}
		return strings.TrimSpace(v[len(v)-1])
	}
	role := last(callerRole)
	if role == "" {
		return pki.Identity{}, false
	}
	return pki.Identity{Subject: last(callerSubject), Role: role, Project: last(callerProject), Method: "forwarded"}, true
}
