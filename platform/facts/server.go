package facts

import (
	"context"
	"slices"

	"google.golang.org/grpc"

	factsv1 "github.com/dcm-project/dcm/gen/dcm/facts/v1"
	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
)

// Server is the one contract by which core tells the facts
// (dcm.facts.v1.LogicalCloudFactsInternalService), over the copies of the
// services a program serves: each of namespace, user, quota and traffic
// returns one over its own copy from its Build, and the all-in-one
// program, which registers every service on one gRPC server, merges them
// into one (Merge) that tells every copy.
type Server struct {
	factsv1.UnimplementedLogicalCloudFactsInternalServiceServer
	copies []*Facts
}

// Serve is the facts contract over copies.
func Serve(copies ...*Facts) *Server { return &Server{copies: copies} }

// Register serves the contract on r.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	factsv1.RegisterLogicalCloudFactsInternalServiceServer(r, s)
}

// PutLogicalCloudFacts implements factsv1.LogicalCloudFactsInternalServiceServer.
func (s *Server) PutLogicalCloudFacts(ctx context.Context, req *factsv1.PutLogicalCloudFactsRequest) (*factsv1.PutLogicalCloudFactsResponse, error) {
	for _, c := range s.copies {
		if err := c.Put(ctx, req.GetFacts()); err != nil {
			return nil, err
		}
	}
	return &factsv1.PutLogicalCloudFactsResponse{}, nil
}

// DeleteLogicalCloudFacts implements factsv1.LogicalCloudFactsInternalServiceServer.
func (s *Server) DeleteLogicalCloudFacts(ctx context.Context, req *factsv1.DeleteLogicalCloudFactsRequest) (*factsv1.DeleteLogicalCloudFactsResponse, error) {
	for _, c := range s.copies {
		if err := c.Delete(ctx, req.GetProject(), req.GetLogicalCloud()); err != nil {
			return nil, err
		}
	}
	return &factsv1.DeleteLogicalCloudFactsResponse{}, nil
}

// ListLogicalCloudFacts implements factsv1.LogicalCloudFactsInternalServiceServer:
// a page of the first copy's facts, less those another copy does not
// hold as they are (the reconcile then tells them to every copy).
func (s *Server) ListLogicalCloudFacts(ctx context.Context, req *factsv1.ListLogicalCloudFactsRequest) (*factsv1.ListLogicalCloudFactsResponse, error) {
	if len(s.copies) == 0 {
		return &factsv1.ListLogicalCloudFactsResponse{}, nil
	}
	fs, next, err := s.copies[0].Page(ctx, store.PageOf(req))
	if err != nil {
		return nil, err
	}
	for _, c := range s.copies[1:] {
		held, err := c.Holds(ctx, fs)
		if err != nil {
			return nil, err
		}
		fs = slices.DeleteFunc(fs, func(f *typesv1.LogicalCloudFacts) bool {
			return !held[store.Key(f.GetProject(), f.GetName())]
		})
	}
	return &factsv1.ListLogicalCloudFactsResponse{Facts: fs, NextPageToken: next}, nil
}

// Merge replaces the facts Servers among svcs, services registered on one
// gRPC server (where a contract is registered once), by one Server over all
// their copies, in the first one's place.
func Merge(svcs []server.Service) []server.Service {
	var merged *Server
	out := make([]server.Service, 0, len(svcs))
	for _, s := range svcs {
		f, ok := s.(*Server)
		switch {
		case !ok:
			out = append(out, s)
		case merged == nil:
			merged = Serve(f.copies...)
			out = append(out, merged)
		default:
			merged.copies = append(merged.copies, f.copies...)
		}
	}
	return out
}
