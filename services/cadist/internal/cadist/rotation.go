package cadist

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/errs"
)

// Rotation moves a logical cloud to another root (or renews its
// intermediates under the same one): RotateCa.
type Rotation struct {
	*issuer
}

// RotateCa implements cadistv1.CaDistServiceServer.
func (s *Rotation) RotateCa(ctx context.Context, req *cadistv1.RotateCaRequest) (*cadistv1.RotateCaResponse, error) {
	var resp *cadistv1.RotateCaResponse
	err := retry(func() error {
		var err error
		resp, err = s.rotate(ctx, req)
		return err
	})
	return resp, err
}

func (s *Rotation) rotate(ctx context.Context, req *cadistv1.RotateCaRequest) (*cadistv1.RotateCaResponse, error) {
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
