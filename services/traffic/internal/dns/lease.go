package dns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// Replicas (docs/traffic.md "External DNS"): every traffic replica runs
// the loop, and a group's runs are passed by one replica at a time, the
// one that holds the group's lease in the collection dns_leases for that
// pass. A replica finding another's lease leaves the group to it this
// round; a replica that died holding one leaves it to expire (LeaseTTL).
// So two replicas never write one group's records at once, and the groups
// spread over the replicas by whoever comes first.

// replicaName names this controller in its leases: store.ReplicaID with a
// random part, so two controllers of one process are two holders.
func replicaName() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return store.ReplicaID("traffic") + "/" + hex.EncodeToString(b[:])
}

// byGroup splits the runs by group, in the order first met.
func byGroup(all []store.Item[*structpb.Struct]) ([]string, map[string][]store.Item[*structpb.Struct], error) {
	var order []string
	groups := map[string][]store.Item[*structpb.Struct]{}
	for _, it := range all {
		s, err := fromStruct(it.Msg)
		if err != nil {
			return nil, nil, err
		}
		if _, ok := groups[s.Group]; !ok {
			order = append(order, s.Group)
		}
		groups[s.Group] = append(groups[s.Group], it)
	}
	return order, groups, nil
}

// syncGroup passes over one group's runs if this controller can hold the
// group's lease, and leaves them alone while another replica holds it.
func (c *Controller) syncGroup(ctx context.Context, group string, runs []store.Item[*structpb.Struct]) (err error) {
	held, err := c.leases.Hold(ctx, "dns/"+group, c.Holder, c.LeaseTTL)
	var he *store.HeldError
	switch {
	case errors.As(err, &he) || errs.Code(err) == codes.Aborted:
		c.log.Debug("dns runs of the group are another replica's this round", zap.String("group", group), zap.Error(err))
		return nil
	case err != nil:
		return err
	}
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		select {
		case <-held.Lost:
			c.log.Warn("dns lease lost: the group's pass is stopped", zap.String("group", group))
			cancel()
		case <-done:
		}
	}()
	defer func() {
		close(done)
		cancel()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), c.LeaseTTL/3)
		defer rcancel()
		if rerr := held.Release(rctx); rerr != nil {
			c.log.Warn("release dns lease: it expires instead", zap.String("group", group), zap.Error(rerr))
		}
	}()
	for _, it := range runs {
		if rerr := c.syncRun(gctx, it); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}
