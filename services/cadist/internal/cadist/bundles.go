package cadist

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// GetBundle implements cadistv1.CaDistServiceServer: the public bundle of
// a cluster's live intermediate (no key).
func (s *Service) GetBundle(ctx context.Context, req *cadistv1.GetBundleRequest) (*cadistv1.GetBundleResponse, error) {
	items, err := s.intermediates.Children(ctx, cloudKey(req.GetProject(), req.GetLogicalCloud()))
	if err != nil {
		return nil, err
	}
	var found []intermediate
	var providers []string
	for _, it := range items {
		b := it.Msg
		if b.GetRevoked() || it.Deleting || b.GetCluster() != req.GetCluster() ||
			(req.GetClusterProvider() != "" && b.GetClusterProvider() != req.GetClusterProvider()) {
			continue
		}
		found = append(found, it)
		providers = append(providers, b.GetClusterProvider())
	}
	switch {
	case len(found) == 0:
		return nil, errs.NotFound("logical cloud %q of project %q has no CA bundle on cluster %q (its service mesh is not applied there)",
			req.GetLogicalCloud(), req.GetProject(), req.GetCluster())
	case len(found) > 1:
		slices.Sort(providers)
		return nil, &errs.Error{Code: codes.FailedPrecondition, Field: "cluster-provider", Msg: fmt.Sprintf(
			"cluster-provider: clusters named %q of providers %s hold the logical cloud; name one with ?cluster-provider=",
			req.GetCluster(), strings.Join(providers, ", "))}
	}
	ca, err := s.settledCA(ctx, req.GetProject(), req.GetLogicalCloud())
	if err != nil {
		return nil, err
	}
	return &cadistv1.GetBundleResponse{Bundle: s.public(ctx, ca, found[0].Msg)}, nil
}

// settledCA reads a logical cloud's CA state and, once the overlap of its
// last root change has passed, drops the previous root from the record
// (a lost race to another writer is harmless: the answer is the same).
func (s *Service) settledCA(ctx context.Context, project, lc string) (*cadistv1.LogicalCloudCa, error) {
	cur, err := s.clouds.Get(ctx, cloudKey(project, lc))
	if errs.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if cur.Msg.GetPreviousRoot() != "" && !s.overlapping(cur.Msg) {
		s.expireOverlap(cur.Msg)
		if err := s.clouds.Update(ctx, cloudKey(project, lc), cur.Version, cur.Msg); err != nil && errs.Code(err) != codes.Aborted {
			return nil, err
		}
	}
	return cur.Msg, nil
}

// RotateCa implements cadistv1.CaDistServiceServer.
func (s *Service) RotateCa(ctx context.Context, req *cadistv1.RotateCaRequest) (*cadistv1.RotateCaResponse, error) {
	var resp *cadistv1.RotateCaResponse
	err := retry(func() error {
		var err error
		resp, err = s.rotate(ctx, req)
		return err
	})
	return resp, err
}

func (s *Service) rotate(ctx context.Context, req *cadistv1.RotateCaRequest) (*cadistv1.RotateCaResponse, error) {
	project, lc := req.GetProject(), req.GetLogicalCloud()
	items, err := s.intermediates.Children(ctx, cloudKey(project, lc))
	if err != nil {
		return nil, err
	}
	var lives []intermediate
	for _, it := range items {
		if !it.Msg.GetRevoked() && !it.Deleting {
			lives = append(lives, it)
		}
	}
	if len(lives) == 0 {
		return nil, errNoMesh(project, lc)
	}
	cur, err := s.clouds.Get(ctx, cloudKey(project, lc))
	if err != nil {
		return nil, err
	}
	ca := cur.Msg
	s.expireOverlap(ca)
	want := req.GetRoot()
	switch {
	case want == "":
		want = ca.GetRoot()
	case ca.GetSpecRoot() != "" && want != ca.GetSpecRoot():
		return nil, &errs.Error{Code: codes.FailedPrecondition, Field: "root", Msg: fmt.Sprintf(
			"root: the logical cloud names root %q in spec.ca-root, which its next update would restore; change spec.ca-root instead", ca.GetSpecRoot())}
	}
	if err := s.checkRootChange(ca, want); err != nil {
		return nil, err
	}
	root, err := s.signer(ctx, want)
	if err != nil {
		return nil, err
	}
	if err := checkUse(root.msg, project); err != nil {
		return nil, err
	}
	s.moveRoot(ca, want)
	if err := s.clouds.Update(ctx, cloudKey(project, lc), cur.Version, ca); err != nil {
		return nil, err
	}
	out := &cadistv1.RotateCaResponse{Ca: ca}
	for _, it := range lives {
		b := it.Msg
		_, lastGen := findLive(items, b.GetClusterProvider(), b.GetCluster())
		if err := s.revoke(ctx, it); err != nil {
			return nil, err
		}
		// The same DNS names as the one it replaces: the next
		// IssueIntermediates (apply, update) brings them in step.
		nb, err := s.issue(ctx, ca, root, project, lc, b.GetClusterProvider(), b.GetCluster(), b.GetTrustDomain(), permittedDNS(b), lastGen+1)
		if err != nil {
			return nil, err
		}
		out.Bundles = append(out.Bundles, nb)
	}
	return out, nil
}
