package cadist

import (
	"context"
	"slices"
)

// IntermediateIDs are the ids of every intermediate record, revoked ones
// included, sorted.
func (s *Intermediates) IntermediateIDs(ctx context.Context) ([]string, error) {
	all, err := s.intermediates.All(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(all))
	for _, it := range all {
		out = append(out, it.ID)
	}
	slices.Sort(out)
	return out, nil
}
