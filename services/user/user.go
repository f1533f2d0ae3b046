// Package user is the user service's entry point for the programs that
// serve it (its own command and the all-in-one program); the service itself
// lives in internal/.
package user

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/dcm-project/dcm/platform/app"
	"github.com/dcm-project/dcm/platform/facts"
	"github.com/dcm-project/dcm/platform/kube"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/services/user/internal/user"
)

// Name is the program name of the user service.
const Name = "user"

// Collections are the store collections the user service opens on its view
// of the store (Env.StoreFor(Name)): its database user's role needs these
// and no other. docs/store.md's roles and mongosh script are generated from
// them (make generate).
var Collections = user.Collections

// Build is the user service's app.Build: the store, the lifetime of the
// certificates its CSRs ask for (DCM_CERT_LIFETIME; one the clusters'
// signers cannot honour stops it at start). It holds no client of core:
// core tells it the logical clouds' facts.
func Build(_ context.Context, env *app.Env) ([]server.Service, server.Options, error) {
	if err := kube.CheckCertLifetime("DCM_CERT_LIFETIME", env.Config.CertLifetime); err != nil {
		return nil, server.Options{}, fmt.Errorf("user: %w", err)
	}
	st, err := env.StoreFor(Name)
	if err != nil {
		return nil, server.Options{}, err
	}
	svc := user.New(st, env.Config.CertLifetime)
	log := env.Log.Named("owners")
	return []server.Service{svc, facts.Serve(svc.Facts())}, server.Options{
		Background: []func(context.Context) error{func(ctx context.Context) error { return assignOwners(ctx, svc, log) }},
	}, nil
}

// assignOwners runs the service's one-time AssignOwners until it succeeds
// (the store may not answer at first) or the program stops; a failure
// never stops the service.
func assignOwners(ctx context.Context, svc *user.Service, log *zap.Logger) error {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		n, err := svc.AssignOwners(ctx)
		if err == nil {
			if n > 0 {
				log.Info("gave seed 002 flat bodies' permissions to their users; update their logical clouds to apply it", zap.Int("permissions", n))
			}
			return nil
		}
		log.Warn("give flat bodies' permissions to their users; will retry", zap.Error(err))
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
