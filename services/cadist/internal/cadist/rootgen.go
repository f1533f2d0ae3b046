package cadist

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/store"
)

// rescan is how often the generator looks for roots left generating even
// when nobody woke it (a create served by another replica).
const rescan = 30 * time.Second

// Generator is the service's background loop: it generates the roots
// created without a certificate and prunes the revoked intermediates.
type Generator struct {
	roots  *store.Records[*cadistv1.Root]
	pruner *Intermediates
	now    func() time.Time
	log    *zap.Logger
	// wake tells the root generator there is work (buffered, one).
	wake chan struct{}
}

// kick wakes the generator; it never blocks.
func (s *Generator) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run generates the keys of the roots created without a certificate, off
// the request path (an RSA 4096 key takes seconds), until ctx ends. It
// starts with the roots a previous run left generating.
func (s *Generator) Run(ctx context.Context) error {
	log := s.log
	if log == nil {
		log = zap.NewNop()
	}
	t := time.NewTicker(rescan)
	defer t.Stop()
	for {
		if err := s.generatePending(ctx); err != nil && ctx.Err() == nil {
			log.Warn("root generation", zap.Error(err))
		}
		if _, err := s.pruner.PruneRevoked(ctx); err != nil && ctx.Err() == nil {
			log.Warn("prune revoked intermediates", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-t.C:
		}
	}
}

// generatePending generates every root in state generating.
func (s *Generator) generatePending(ctx context.Context) error {
	pending, err := s.roots.Match(ctx, map[string]string{"state": StateGenerating})
	if err != nil {
		return err
	}
	for _, it := range pending {
		// Read it again: a root deleted while an earlier one was being
		// generated (an RSA key takes seconds) is not worth a key.
		cur, err := s.roots.Get(ctx, it.ID)
		if errs.Code(err) == codes.NotFound || (err == nil && (cur.Version != it.Version || it.Deleting)) {
			continue
		}
		if err != nil {
			return err
		}
		if err := s.generate(ctx, it); err != nil {
			return err
		}
	}
	return nil
}

// generate makes one root's key and certificate and marks it ready,
// conditionally on the version read: a root deleted (or recreated)
// meanwhile is left alone.
func (s *Generator) generate(ctx context.Context, it store.Item[*cadistv1.Root]) error {
	r := it.Msg
	key, err := newKey(r.GetKeyType())
	if err != nil {
		return fmt.Errorf("root %q: %w", it.ID, err)
	}
	cert, err := selfSignedRoot(it.ID, key, s.now(), RootValidity)
	if err != nil {
		return fmt.Errorf("root %q: %w", it.ID, err)
	}
	k, err := keyPEM(key)
	if err != nil {
		return fmt.Errorf("root %q: %w", it.ID, err)
	}
	r.Certificate, r.State, r.HasPrivateKey = certPEM(cert), StateReady, true
	r.NotAfter = cert.NotAfter.UTC().Format(time.RFC3339)
	err = s.roots.Update(ctx, it.ID, it.Version, r, store.Secret{Name: privateKeySecret, Value: k})
	switch errs.Code(err) {
	case codes.OK, codes.NotFound, codes.Aborted: // deleted or changed meanwhile: nothing to do
		return nil
	}
	return err
}
