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

// Service is the CA-distribution service's gRPC API, public and internal.
type Service struct {
	cadistv1.UnimplementedCaDistServiceServer
	cadistv1.UnimplementedCaDistInternalServiceServer
	roots         *store.Records[*cadistv1.Root]
	intermediates *store.Records[*cadistv1.Bundle]
	clouds        *store.Records[*cadistv1.LogicalCloudCa]
	opts          Options
	// wake tells the root generator there is work (buffered, one).
	wake chan struct{}
}

// New opens the service's collections on st.
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
	return &Service{
		roots:         store.NewRecords(st, RootsCollection, "root", func() *cadistv1.Root { return &cadistv1.Root{} }),
		intermediates: store.NewRecords(st, IntermediatesCollection, "intermediate", func() *cadistv1.Bundle { return &cadistv1.Bundle{} }),
		clouds:        store.NewRecords(st, LogicalCloudCAsCollection, "logical cloud CA", func() *cadistv1.LogicalCloudCa { return &cadistv1.LogicalCloudCa{} }),
		opts:          opts,
		wake:          make(chan struct{}, 1),
	}
}

// Register serves both APIs on r.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	cadistv1.RegisterCaDistServiceServer(r, s)
	cadistv1.RegisterCaDistInternalServiceServer(r, s)
}

func (s *Service) now() time.Time { return s.opts.Now() }
