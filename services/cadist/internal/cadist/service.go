package cadist

import (
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	cadistv1 "github.com/dcm-project/dcm/gen/dcm/cadist/v1"
	"github.com/dcm-project/dcm/platform/store"
)

// Defaults of Options.
const (
	DefaultIntermediateLifetime = 365 * 24 * time.Hour
	DefaultOverlap              = 24 * time.Hour
	DefaultRevokedRetention     = 30 * 24 * time.Hour
)

// RootValidity is how long a generated root CA is valid.
const RootValidity = 10 * 365 * 24 * time.Hour

// InstallationRoot is the root that signs for logical clouds that name no
// root in projects without a default root; made on first use.
const InstallationRoot = "dcm-mesh-root"

// Root states.
const (
	StateGenerating = "generating"
	StateReady      = "ready"
)

// Names of sealed values.
const (
	privateKeySecret = "private_key"
	caKeySecret      = "ca_key"
)

// Options tune the service; zero values take the defaults.
type Options struct {
	// IntermediateLifetime is how long an intermediate is valid (capped by
	// its root's expiry).
	IntermediateLifetime time.Duration
	// Overlap is how long after a root change the old root stays trusted.
	Overlap time.Duration
	// RevokedRetention is how long a revoked intermediate's record is
	// kept (DCM_CA_REVOKED_RETENTION).
	RevokedRetention time.Duration
	// Now is the clock (tests set a fake one).
	Now func() time.Time
	// Log is where the root generator reports failures (nil: nowhere).
	Log *zap.Logger
}

// Service is the CA-distribution service's gRPC API, public and internal:
// a thin type composed of the parts that each do one job, with only the
// collections and settings that job uses. The gRPC methods are the parts'
// own, promoted:
//
//   - Roots: create, read, list, check and delete of roots (roots.go);
//   - Generator: the background loop that generates the roots created
//     without a certificate and prunes revoked intermediates (rootgen.go);
//   - Bundles: the public bundle of a cluster's intermediate (bundles.go);
//   - Rotation: RotateCa (rotation.go);
//   - Intermediates: issue, read, revoke, prune and purge of
//     intermediates (intermediates.go).
//
// The parts share helpers: rootKeys loads a root able to sign (roots.go),
// cloudCAs is the logical clouds' CA state, which root signs and which
// roots a bundle trusts (clouds.go), and issuer issues and revokes a
// cluster's intermediate (intermediates.go).
type Service struct {
	unimplemented
	*Roots
	*Generator
	*Bundles
	*Rotation
	*Intermediates
}

// unimplemented answers the RPCs no part serves; one level down, so that
// the parts' methods, one level up, win.
type unimplemented struct {
	cadistv1.UnimplementedCaDistServiceServer
	cadistv1.UnimplementedCaDistInternalServiceServer
}

// New opens the service's collections on st and wires the parts.
func New(st *store.Store, opts Options) *Service {
	if opts.IntermediateLifetime <= 0 {
		opts.IntermediateLifetime = DefaultIntermediateLifetime
	}
	if opts.Overlap <= 0 {
		opts.Overlap = DefaultOverlap
	}
	if opts.RevokedRetention <= 0 {
		opts.RevokedRetention = DefaultRevokedRetention
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	roots := store.NewRecords(st, RootsCollection, "root", func() *cadistv1.Root { return &cadistv1.Root{} })
	intermediates := store.NewRecords(st, IntermediatesCollection, "intermediate", func() *cadistv1.Bundle { return &cadistv1.Bundle{} })
	cas := &cloudCAs{rootKeys: &rootKeys{roots: roots},
		clouds: store.NewRecords(st, LogicalCloudCAsCollection, "logical cloud CA", func() *cadistv1.LogicalCloudCa { return &cadistv1.LogicalCloudCa{} }),
		now:    opts.Now, overlap: opts.Overlap}
	iss := &issuer{cloudCAs: cas, intermediates: intermediates, now: opts.Now, lifetime: opts.IntermediateLifetime}
	ims := &Intermediates{issuer: iss, retention: opts.RevokedRetention}
	gen := &Generator{roots: roots, pruner: ims, now: opts.Now, log: opts.Log, wake: make(chan struct{}, 1)}
	return &Service{
		Roots:         &Roots{roots: roots, intermediates: intermediates, generator: gen, now: opts.Now},
		Generator:     gen,
		Bundles:       &Bundles{cloudCAs: cas, intermediates: intermediates},
		Rotation:      &Rotation{issuer: iss},
		Intermediates: ims,
	}
}

// Register serves both APIs on r.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	cadistv1.RegisterCaDistServiceServer(r, s)
	cadistv1.RegisterCaDistInternalServiceServer(r, s)
}
