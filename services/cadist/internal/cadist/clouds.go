package cadist

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// A logical cloud's CA state (LogicalCloudCa, id project/lc) says which
// root signs its intermediates and, for DCM_CA_OVERLAP after that root
// changed, which root it replaced: both are trusted meanwhile, the new one
// first, so the trusted set only ever grows by the new root and then
// shrinks to it (Istio accepts a root change only between root bundles
// that are subsets of one another, docs/mesh.md section 4).
//
// Which root signs: the one the request names (spec.ca-root); else the
// one the logical cloud already uses; else the project's default root;
// else the installation's (made on first use). A named or kept root must
// be one the project may use (mayUse: it lists the project, or is shared). A logical cloud thus keeps
// its root when the project's default changes; RotateCa moves it.

// cloudCAs is the logical clouds' CA state: which root signs a logical
// cloud's intermediates, its changes and their overlap, and the roots a
// bundle trusts. It writes the roots collection only to make the
// installation's root (defaultRoot).
type cloudCAs struct {
	*rootKeys
	clouds  *store.Records[*cadistv1.LogicalCloudCa]
	now     func() time.Time
	overlap time.Duration
}

// cloudCA reads a logical cloud's CA state; nil if it has none.
func (s *cloudCAs) cloudCA(ctx context.Context, project, lc string) (*cadistv1.LogicalCloudCa, error) {
	v, err := s.clouds.Get(ctx, cloudKey(project, lc))
	if errs.Code(err) == codes.NotFound {
		return nil, nil
	}
	return v.Msg, err
}

// settleRoot decides which root signs the logical cloud's intermediates
// for a request naming requested (empty: none), records it and answers the
// state with the root.
func (s *cloudCAs) settleRoot(ctx context.Context, project, lc, requested string) (*cadistv1.LogicalCloudCa, *signingRoot, error) {
	key := cloudKey(project, lc)
	cur, err := s.clouds.Get(ctx, key)
	exists := err == nil
	if err != nil && errs.Code(err) != codes.NotFound {
		return nil, nil, err
	}
	want := requested
	if want == "" && exists && cur.Msg.GetSpecRoot() == "" && cur.Msg.GetRoot() != "" {
		want = cur.Msg.GetRoot()
	}
	var root *signingRoot
	if want != "" {
		root, err = s.signer(ctx, want)
		if err == nil {
			// Only a root of the project's, or a shared one, signs for
			// it: one named in spec.ca-root is refused; one it used
			// before (named when this was not checked) is left for the
			// default.
			err = checkUse(root.msg, project)
		}
		if err != nil && requested == "" && (errs.Code(err) == codes.InvalidArgument || errs.Code(err) == codes.PermissionDenied) {
			want, root, err = "", nil, nil // the root it used is gone, or not its own: take the default
		}
		if err != nil {
			return nil, nil, err
		}
	}
	if want == "" {
		if want, err = s.defaultRoot(ctx, project); err != nil {
			return nil, nil, err
		}
		if root, err = s.signer(ctx, want); err != nil {
			return nil, nil, err
		}
	}
	next := &cadistv1.LogicalCloudCa{Project: project, LogicalCloud: lc}
	if exists {
		next = proto.Clone(cur.Msg).(*cadistv1.LogicalCloudCa)
		if err := s.checkRootChange(next, want); err != nil {
			return nil, nil, err
		}
	}
	s.moveRoot(next, want)
	next.SpecRoot = requested
	s.expireOverlap(next)
	switch {
	case !exists:
		err = s.clouds.Create(ctx, key, project, next)
	case !proto.Equal(cur.Msg, next):
		err = s.clouds.Update(ctx, key, cur.Version, next)
	}
	if err != nil {
		return nil, nil, err
	}
	return next, root, nil
}

// checkRootChange refuses a move to a third root while the last change
// overlaps: the trusted roots would go from {new, old} to {third, new},
// neither a subset of the other, which istiod refuses. Going back to the
// previous root swaps the two and is allowed.
func (s *cloudCAs) checkRootChange(ca *cadistv1.LogicalCloudCa, root string) error {
	if ca == nil || root == ca.GetRoot() || root == ca.GetPreviousRoot() || !s.overlapping(ca) {
		return nil
	}
	return &errs.Error{Code: codes.FailedPrecondition, Field: "root", Reason: errs.ReasonWrongState, Msg: fmt.Sprintf(
		"root: the logical cloud's root changed from %q to %q, and both stay trusted until %s; a change to a third root before then would leave istiod refusing the new root bundle",
		ca.GetPreviousRoot(), ca.GetRoot(), ca.GetOverlapUntil())}
}

// moveRoot makes root the logical cloud's root; a change starts an
// overlap with the root it replaces.
func (s *cloudCAs) moveRoot(ca *cadistv1.LogicalCloudCa, root string) {
	if ca.GetRoot() == root {
		return
	}
	if ca.GetRoot() != "" {
		now := s.now()
		ca.PreviousRoot = ca.GetRoot()
		ca.RotatedAt = now.UTC().Format(time.RFC3339Nano)
		ca.OverlapUntil = now.Add(s.overlap).UTC().Format(time.RFC3339Nano)
	}
	ca.Root = root
}

// overlapping tells whether the previous root is still trusted.
func (s *cloudCAs) overlapping(ca *cadistv1.LogicalCloudCa) bool {
	if ca.GetPreviousRoot() == "" {
		return false
	}
	until, err := time.Parse(time.RFC3339Nano, ca.GetOverlapUntil())
	return err == nil && s.now().Before(until)
}

// expireOverlap drops the previous root once the overlap has passed.
func (s *cloudCAs) expireOverlap(ca *cadistv1.LogicalCloudCa) {
	if ca.GetPreviousRoot() != "" && !s.overlapping(ca) {
		ca.PreviousRoot, ca.OverlapUntil = "", ""
	}
}

// defaultRoot is the root of a project's logical clouds that name none:
// the project's default root, else the installation's, made now if it is
// not there yet.
func (s *cloudCAs) defaultRoot(ctx context.Context, project string) (string, error) {
	all, err := s.roots.List(ctx, "")
	if err != nil {
		return "", err
	}
	for _, r := range all {
		if slices.Contains(r.GetProjects(), project) {
			return r.GetMetadata().GetName(), nil
		}
	}
	if slices.ContainsFunc(all, func(r *cadistv1.Root) bool { return r.GetMetadata().GetName() == InstallationRoot }) {
		return InstallationRoot, nil
	}
	// ECDSA P-256 takes milliseconds: made here, ready at once.
	key, err := newKey(KeyECDSAP256)
	if err != nil {
		return "", errs.Internal(err, "generate the installation's root")
	}
	cert, err := selfSignedRoot(InstallationRoot, key, s.now(), RootValidity)
	if err != nil {
		return "", errs.Internal(err, "generate the installation's root")
	}
	k, err := keyPEM(key)
	if err != nil {
		return "", errs.Internal(err, "generate the installation's root")
	}
	r := newRootRecord(InstallationRoot)
	r.Certificate, r.KeyType, r.State, r.HasPrivateKey = certPEM(cert), KeyECDSAP256, StateReady, true
	r.NotAfter = cert.NotAfter.UTC().Format(time.RFC3339)
	err = s.roots.Create(ctx, InstallationRoot, "", r, store.Secret{Name: privateKeySecret, Value: k})
	if err != nil && errs.Code(err) != codes.AlreadyExists { // another request made it first: use that one
		return "", err
	}
	return InstallationRoot, nil
}

// public fills in a bundle's trusted roots for an answer: the root that
// signed it, the logical cloud's root and, during an overlap, the root
// before it; the signing root first. A root deleted since is left out.
func (s *cloudCAs) public(ctx context.Context, ca *cadistv1.LogicalCloudCa, b *cadistv1.Bundle) *cadistv1.Bundle {
	out := proto.Clone(b).(*cadistv1.Bundle)
	names := []string{b.GetRoot()}
	if ca != nil {
		names = append(names, ca.GetRoot())
		if s.overlapping(ca) {
			names = append(names, ca.GetPreviousRoot())
		}
	}
	out.TrustedRoots, out.RootCert = nil, ""
	for _, n := range names {
		if n == "" || slices.Contains(out.TrustedRoots, n) {
			continue
		}
		r, err := s.roots.Get(ctx, n)
		if err != nil {
			continue
		}
		out.TrustedRoots = append(out.TrustedRoots, n)
		out.RootCert += anchorPEM(r.Msg)
	}
	return out
}

func newRootRecord(name string) *cadistv1.Root {
	return &cadistv1.Root{Metadata: &typesv1.Metadata{Name: name}}
}

// errNoMesh is RotateCa's answer for a logical cloud without intermediates.
func errNoMesh(project, lc string) error {
	return errs.Because(errs.ReasonWrongState,
		"logical cloud %q of project %q has no intermediate CA: it has no service mesh, or it was never applied (or is terminated); nothing to rotate", lc, project)
}
