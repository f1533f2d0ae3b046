package cadist

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Bundles answers the public bundles of the clusters' intermediates.
type Bundles struct {
	*cloudCAs
	// intermediates is read only.
	intermediates *store.Records[*cadistv1.Bundle]
}

// GetBundle implements cadistv1.CaDistServiceServer: the public bundle of
// a cluster's live intermediate (no key).
func (s *Bundles) GetBundle(ctx context.Context, req *cadistv1.GetBundleRequest) (*cadistv1.GetBundleResponse, error) {
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
func (s *Bundles) settledCA(ctx context.Context, project, lc string) (*cadistv1.LogicalCloudCa, error) {
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
