// Package facts is the copy of core's logical clouds that the namespace,
// user, quota and traffic services keep (docs/logical-clouds.md, "Told
// once"): core tells each of them a logical cloud's facts when it creates
// it, when they change, when it is being deleted and when it is gone, and
// re-tells all of them periodically (its reconcile). A service answers the
// parent checks of its public API from its copy and never asks core.
package facts

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	typesv1 "github.com/dcm-project/dcm/gen/dcm/types/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Facts is one service's collection of logical cloud facts, keyed by
// "project/logical-cloud" (reads by _id only: docs/store.md).
type Facts struct {
	recs *store.Records[*typesv1.LogicalCloudFacts]
}

// Open opens the collection of service's copy (<service>_logical_clouds)
// on st.
func Open(st *store.Store, service string) *Facts {
	return &Facts{recs: store.NewRecords(st, service+"_logical_clouds", "logical cloud facts",
		func() *typesv1.LogicalCloudFacts { return &typesv1.LogicalCloudFacts{} })}
}

// Put stores f, replacing what was stored of its logical cloud: one
// upsert by _id (store.Records.Put), not a read and then an insert or an
// update. Core is the one writer of the facts and tells a live logical
// cloud's facts under its transition lock, as it removes them
// (docs/logical-clouds.md, "Told once"), so the last put is the one that
// must stay and there is no version to compare. Putting the same facts
// again stores the same document. A project or name missing is
// InvalidArgument.
func (x *Facts) Put(ctx context.Context, f *typesv1.LogicalCloudFacts) error {
	if f.GetProject() == "" {
		return errs.Invalid("facts.project", "is required")
	}
	if f.GetName() == "" {
		return errs.Invalid("facts.name", "is required")
	}
	return x.recs.Put(ctx, store.Key(f.GetProject(), f.GetName()), f.GetProject(), f)
}

// Delete forgets logical cloud lc of project; forgetting one not known is
// no error.
func (x *Facts) Delete(ctx context.Context, project, lc string) error {
	err := x.recs.Delete(ctx, store.Key(project, lc))
	if errs.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// Parent reads the facts of logical cloud lc of project for a parent
// check: NotFound, as core answers it, when the service has no facts of
// it or it is being deleted (the service answers as if it did not exist,
// as it did when it asked core).
func (x *Facts) Parent(ctx context.Context, project, lc string) (*typesv1.LogicalCloudFacts, error) {
	v, err := x.recs.Get(ctx, store.Key(project, lc))
	if errs.Code(err) == codes.NotFound || (err == nil && v.Msg.GetDeleting()) {
		return nil, errs.NotFound("logical cloud %q not found in project %q", lc, project)
	}
	if err != nil {
		return nil, err
	}
	return v.Msg, nil
}

// Check is Parent as a store.Records.CreateChecked check.
func (x *Facts) Check(project, lc string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := x.Parent(ctx, project, lc)
		return err
	}
}

// Page reads a page of the facts held, of every project, ordered by
// project and name (core's reconcile compares them with its records).
func (x *Facts) Page(ctx context.Context, page store.PageRequest) ([]*typesv1.LogicalCloudFacts, string, error) {
	return x.recs.ScanPage(ctx, page)
}

// Holds answers, of the facts fs, those this copy holds as they are (the
// same message), by "project/logical-cloud": one store command.
func (x *Facts) Holds(ctx context.Context, fs []*typesv1.LogicalCloudFacts) (map[string]bool, error) {
	ids := make([]string, 0, len(fs))
	for _, f := range fs {
		ids = append(ids, store.Key(f.GetProject(), f.GetName()))
	}
	held, err := x.recs.GetMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(fs))
	for i, f := range fs {
		if h, ok := held[ids[i]]; ok && proto.Equal(h, f) {
			out[ids[i]] = true
		}
	}
	return out, nil
}

// HasAny answers whether the service was told of a logical cloud of
// project that is not being deleted: what it knows of a project (the
// traffic service's check of a group that names no logical cloud yet).
func (x *Facts) HasAny(ctx context.Context, project string) (bool, error) {
	token := ""
	for {
		fs, next, err := x.recs.ListPage(ctx, project, store.PageRequest{Token: token})
		if err != nil {
			return false, err
		}
		for _, f := range fs {
			if !f.GetDeleting() {
				return true, nil
			}
		}
		if next == "" {
			return false, nil
		}
		token = next
	}
}
