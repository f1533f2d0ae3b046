package rsync

import (
	"context"

	rsyncv1 "github.com/dcm-project/dcm/gen/dcm/rsync/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// CreateClusterProvider implements rsyncv1.RsyncServiceServer.
func (rg *registry) CreateClusterProvider(ctx context.Context, req *rsyncv1.CreateClusterProviderRequest) (*rsyncv1.CreateClusterProviderResponse, error) {
	p := req.GetClusterProvider()
	if err := rg.providers.Create(ctx, p.GetMetadata().GetName(), "", p); err != nil {
		return nil, err
	}
	return &rsyncv1.CreateClusterProviderResponse{ClusterProvider: p}, nil
}

// GetClusterProvider implements rsyncv1.RsyncServiceServer.
func (rg *registry) GetClusterProvider(ctx context.Context, req *rsyncv1.GetClusterProviderRequest) (*rsyncv1.GetClusterProviderResponse, error) {
	p, err := rg.providers.Get(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &rsyncv1.GetClusterProviderResponse{ClusterProvider: p.Msg}, nil
}

// ListClusterProviders implements rsyncv1.RsyncServiceServer.
func (rg *registry) ListClusterProviders(ctx context.Context, req *rsyncv1.ListClusterProvidersRequest) (*rsyncv1.ListClusterProvidersResponse, error) {
	ps, next, err := rg.providers.ListPage(ctx, "", store.PageOf(req))
	if err != nil {
		return nil, err
	}
	return &rsyncv1.ListClusterProvidersResponse{ClusterProviders: ps, NextPageToken: next}, nil
}

// UpdateClusterProvider implements rsyncv1.RsyncServiceServer. The name is
// the record's identity: a body naming another provider is refused.
func (rg *registry) UpdateClusterProvider(ctx context.Context, req *rsyncv1.UpdateClusterProviderRequest) (*rsyncv1.UpdateClusterProviderResponse, error) {
	in := req.GetClusterProvider()
	if n := in.GetMetadata().GetName(); n != req.GetName() {
		return nil, errs.Invalid("cluster_provider.metadata.name", "must equal the cluster provider in the path (%q), got %q", req.GetName(), n)
	}
	p, err := rg.providers.Modify(ctx, req.GetName(), func(p *rsyncv1.ClusterProvider) error {
		p.Metadata = in.GetMetadata()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &rsyncv1.UpdateClusterProviderResponse{ClusterProvider: p}, nil
}

// DeleteClusterProvider implements rsyncv1.RsyncServiceServer. A provider
// with clusters is refused: delete them first.
func (rg *registry) DeleteClusterProvider(ctx context.Context, req *rsyncv1.DeleteClusterProviderRequest) (*rsyncv1.DeleteClusterProviderResponse, error) {
	cs, err := rg.clusters.List(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	if len(cs) > 0 {
		return nil, errs.FailedPrecondition("cluster provider %q still has %d clusters: delete them first", req.GetName(), len(cs))
	}
	if err := rg.providers.Delete(ctx, req.GetName()); err != nil {
		return nil, err
	}
	return &rsyncv1.DeleteClusterProviderResponse{}, nil
}
