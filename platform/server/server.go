// Package server is the one bootstrap every DCM program runs: a gRPC server
// with the shared interceptor chain, health and reflection, an HTTP listener
// for /metrics, /healthz and (for the gateway) REST, an optional plain-HTTP
// listener for Prometheus scrapes (/metrics alone), background loops, and a
// graceful shutdown that reports NOT_SERVING before it stops. It must not
// know about any service.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/dcm-project/dcm/platform/errs"
	"github.com/dcm-project/dcm/platform/logging"
	"github.com/dcm-project/dcm/platform/pki"
)

// Service is a gRPC API a program serves.
type Service interface {
	Register(s grpc.ServiceRegistrar)
}

// Options are the optional parts of a program.
type Options struct {
	// HTTPHandler serves every HTTP path but /metrics and /healthz (the gateway's REST API).
	HTTPHandler http.Handler
	// Background loops run beside the servers and stop with them.
	Background []func(ctx context.Context) error
	// OnStop runs after the servers stopped (close the store here).
	OnStop []func(ctx context.Context)
	// GRPCListener, when set, is used instead of listening on Config.GRPCAddr;
	// nil with no services means no gRPC listener.
	GRPCListener net.Listener
	// TLS secures both listeners: mutual TLS on gRPC, HTTPS on HTTP. Nil is
	// refused unless Config.InsecureGRPC and Config.InsecureHTTP allow it.
	TLS *pki.TLS
	// HTTPAuth authenticates every HTTP request but /healthz. Nil, with TLS,
	// accepts a client certificate that chains to the CA bundle.
	HTTPAuth func(r *http.Request) (pki.Identity, error)
	// MaxRecvMsgSize is the largest gRPC request the server takes, in
	// bytes; 0 keeps gRPC's default, 4 MiB. The resource synchronizer
	// raises it: a rollout's request repeats each cluster's manifests
	// (docs/rsync.md, "Message sizes").
	MaxRecvMsgSize int
	// InProcess, when set (with TLS), also serves the gRPC services to
	// this program's own calls over in-memory connections (InProcess).
	InProcess *InProcess
}

// Server is a running program's listeners and servers.
type Server struct {
	cfg    Config
	log    *zap.Logger
	opts   Options
	grpc   *grpc.Server
	health *health.Server
	http   *http.Server
	grpcLn net.Listener
	httpLn net.Listener
	// metrics serves /metrics alone, unauthenticated, on Config.MetricsAddr.
	metrics   *http.Server
	metricsLn net.Listener
}

// CheckInsecure refuses the plaintext switches on an address other hosts can
// reach: DCM_INSECURE_GRPC has no certificates (the allow-lists trust the
// program a call names), and DCM_INSECURE_HTTP
// sends bearer tokens in clear. Programs call it before they listen.
func CheckInsecure(cfg Config) error { return checkInsecure(cfg, cfg.GRPCAddr) }

func checkInsecure(cfg Config, grpcAddr string) error {
	if cfg.InsecureGRPC && grpcAddr != "" && !IsLoopback(grpcAddr) {
		return fmt.Errorf("DCM_INSECURE_GRPC serves gRPC without TLS, on a loopback address only, not on %s", grpcAddr)
	}
	if cfg.InsecureHTTP && cfg.HTTPAddr != "" && !IsLoopback(cfg.HTTPAddr) {
		return fmt.Errorf("DCM_INSECURE_HTTP serves plain HTTP on a loopback address only, not on %s", cfg.HTTPAddr)
	}
	return nil
}

// New listens on the configured addresses and registers services. Nothing
// is served until Run.
func New(cfg Config, log *zap.Logger, opts Options, services ...Service) (*Server, error) {
	s := &Server{cfg: cfg, log: log, opts: opts}
	wantGRPC := opts.GRPCListener != nil || (len(services) > 0 && cfg.GRPCAddr != "")
	if opts.TLS == nil && ((wantGRPC && !cfg.InsecureGRPC) || (cfg.HTTPAddr != "" && !cfg.InsecureHTTP)) {
		if opts.GRPCListener != nil {
			_ = opts.GRPCListener.Close()
		}
		return nil, errors.New("no TLS configured: plaintext needs DCM_INSECURE_GRPC / DCM_INSECURE_HTTP")
	}
	grpcAddr := cfg.GRPCAddr
	if opts.GRPCListener != nil {
		grpcAddr = opts.GRPCListener.Addr().String()
	}
	if !wantGRPC {
		grpcAddr = ""
	}
	if err := checkInsecure(cfg, grpcAddr); err != nil {
		if opts.GRPCListener != nil {
			_ = opts.GRPCListener.Close()
		}
		return nil, err
	}
	if ln := opts.GRPCListener; wantGRPC {
		if ln == nil {
			var err error
			if ln, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
				return nil, fmt.Errorf("grpc listen %s: %w", cfg.GRPCAddr, err)
			}
		}
		s.grpcLn = ln
		c := &chain{log: log, validator: mustValidator(), authorize: !cfg.InsecureGRPC, tls: opts.TLS}
		creds := insecure.NewCredentials()
		if !cfg.InsecureGRPC {
			creds = credentials.NewTLS(opts.TLS.GRPCServer())
			if opts.InProcess != nil {
				creds = opts.InProcess.creds(creds)
			}
		}
		grpcOpts := []grpc.ServerOption{
			grpc.Creds(creds),
			grpc.StatsHandler(otelgrpc.NewServerHandler()),
			grpc.ChainUnaryInterceptor(c.unary()...),
			grpc.ChainStreamInterceptor(c.stream()...),
		}
		if opts.MaxRecvMsgSize > 0 {
			grpcOpts = append(grpcOpts, grpc.MaxRecvMsgSize(opts.MaxRecvMsgSize))
		}
		s.grpc = grpc.NewServer(grpcOpts...)
		for _, svc := range services {
			svc.Register(s.grpc)
		}
		s.health = health.NewServer()
		healthpb.RegisterHealthServer(s.grpc, s.health)
		reflection.Register(s.grpc)
		for name := range s.grpc.GetServiceInfo() {
			s.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
		}
	}
	if cfg.HTTPAddr != "" && !cfg.InsecureHTTP && opts.HTTPHandler != nil {
		if err := opts.TLS.HTTPServingError(); err != nil {
			s.closeListeners()
			return nil, fmt.Errorf("DCM_HTTP_TLS_CERT_FILE: the certificate serving REST must be for server use only, without the organization %s: %w",
				pki.RoleService, err)
		}
	}
	if cfg.HTTPAddr != "" {
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			s.closeListeners()
			return nil, fmt.Errorf("http listen %s: %w", cfg.HTTPAddr, err)
		}
		if !cfg.InsecureHTTP {
			ln = tls.NewListener(ln, opts.TLS.HTTPServer())
		}
		s.httpLn = ln
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", s.authenticated(promhttp.Handler()))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
		})
		if opts.HTTPHandler != nil {
			mux.Handle("/", opts.HTTPHandler)
		}
		s.http = &http.Server{
			Handler:           limitBody(int64(cfg.MaxBodyBytes), mux),
			ReadHeaderTimeout: readHeaderTimeout(cfg.HTTPReadTimeout),
			ReadTimeout:       cfg.HTTPReadTimeout,
			WriteTimeout:      cfg.HTTPWriteTimeout,
			IdleTimeout:       cfg.HTTPIdleTimeout,
			ErrorLog:          zap.NewStdLog(log.Named("http")),
		}
	}
	if cfg.MetricsAddr != "" {
		if err := s.listenMetrics(); err != nil {
			s.closeListeners()
			return nil, err
		}
	}
	return s, nil
}

// listenMetrics opens the scrape listener: plain HTTP (a Prometheus server
// needs no DCM credential), GET /metrics and nothing else (no REST, no
// data; every other path is 404), with the main listener's timeouts.
func (s *Server) listenMetrics() error {
	ln, err := net.Listen("tcp", s.cfg.MetricsAddr)
	if err != nil {
		return fmt.Errorf("DCM_METRICS_ADDR: listen %s: %w", s.cfg.MetricsAddr, err)
	}
	s.metricsLn = ln
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.Handler())
	s.metrics = &http.Server{
		// No body is ever read here: nothing to limit.
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout(s.cfg.HTTPReadTimeout),
		ReadTimeout:       s.cfg.HTTPReadTimeout,
		WriteTimeout:      s.cfg.HTTPWriteTimeout,
		IdleTimeout:       s.cfg.HTTPIdleTimeout,
		ErrorLog:          zap.NewStdLog(s.log.Named("metrics")),
	}
	return nil
}

// RetryLater is an HTTPAuth refusal of a client that must wait before it
// tries again (too many failed authentications from its address): 429
// with Retry-After rather than 401.
type RetryLater interface {
	error
	RetryAfter() time.Duration
}

// authenticated serves h to admins that Options.HTTPAuth accepts, or,
// without it, to admins with a client certificate from the CA bundle
// (401 without a credential, 403 for another role). Plain HTTP without
// HTTPAuth (development, loopback only) is open.
func (s *Server) authenticated(h http.Handler) http.Handler {
	auth := s.opts.HTTPAuth
	if auth == nil && s.opts.TLS != nil && !s.cfg.InsecureHTTP {
		auth = func(r *http.Request) (pki.Identity, error) {
			if r.TLS == nil {
				return pki.Identity{}, pki.ErrBadCertificate
			}
			return s.opts.TLS.VerifyClient(r.TLS.PeerCertificates)
		}
	}
	if auth == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := auth(r)
		var limited RetryLater
		if errors.As(err, &limited) {
			// The gateway's limiter audits these, once per address per minute.
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(limited.RetryAfter().Seconds())))))
			errs.WriteHTTPStatus(w, http.StatusTooManyRequests, status.New(codes.ResourceExhausted, limited.Error()))
			return
		}
		if err != nil {
			s.log.Info("unauthenticated request", zap.String("path", r.URL.Path), zap.Error(err))
			errs.WriteHTTPStatus(w, http.StatusUnauthorized, status.New(codes.Unauthenticated, "authentication required"))
			return
		}
		if id.Role != pki.RoleAdmin {
			// The series name clusters, projects' routes and methods:
			// an operator's view, not a tenant's. Refused like a REST
			// route, and audited like one (the gateway's "rest call").
			reqID := r.Header.Get(RequestIDHeader)
			if reqID == "" || len(reqID) > 64 {
				reqID = requestID(r.Context())
			}
			w.Header().Set(RequestIDHeader, reqID)
			errs.WriteHTTPStatus(w, http.StatusForbidden, status.New(codes.PermissionDenied, "your role does not allow this request: /metrics is for admins"))
			s.log.Named(logging.AuditName).Info("rest call", zap.String("subject", id.Subject), zap.String("role", id.Role),
				zap.String("scope", id.Project), zap.String("auth", id.Method), zap.String("http.method", r.Method),
				zap.String("object", r.URL.Path), zap.String("raw_path", r.URL.EscapedPath()), zap.String("route", "/metrics"),
				zap.Int("status", http.StatusForbidden), zap.String("result", "forbidden"),
				zap.String("request_id", reqID), zap.String("remote", r.RemoteAddr))
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) closeListeners() {
	for _, ln := range []net.Listener{s.grpcLn, s.httpLn, s.metricsLn} {
		if ln != nil {
			_ = ln.Close()
		}
	}
}

// GRPCAddr is the bound gRPC address ("" when disabled).
func (s *Server) GRPCAddr() string { return addrOf(s.grpcLn) }

// HTTPAddr is the bound HTTP address ("" when disabled).
func (s *Server) HTTPAddr() string { return addrOf(s.httpLn) }

// MetricsAddr is the bound address of the scrape listener ("" when
// disabled).
func (s *Server) MetricsAddr() string { return addrOf(s.metricsLn) }

func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// Run serves until ctx ends or a part fails, then shuts everything down:
// health goes NOT_SERVING, in-flight requests get ShutdownGrace to finish.
func (s *Server) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	if s.grpc != nil {
		g.Go(func() error {
			// A shutdown that comes before Serve starts makes it return
			// ErrServerStopped: that is a clean stop too.
			if err := s.grpc.Serve(s.grpcLn); !errors.Is(err, grpc.ErrServerStopped) {
				return err
			}
			return nil
		})
		if s.opts.InProcess != nil && !s.cfg.InsecureGRPC {
			g.Go(func() error { return serveInProcess(s.grpc, s.opts.InProcess) })
		}
	}
	if s.http != nil {
		g.Go(func() error {
			if err := s.http.Serve(s.httpLn); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	if s.metrics != nil {
		g.Go(func() error {
			if err := s.metrics.Serve(s.metricsLn); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	for _, loop := range s.opts.Background {
		g.Go(func() error { return loop(gctx) })
	}
	g.Go(func() error {
		<-gctx.Done()
		s.shutdown()
		return nil
	})
	s.log.Info("serving", zap.String("grpc", s.GRPCAddr()), zap.String("http", s.HTTPAddr()), zap.String("metrics", s.MetricsAddr()))
	err := g.Wait()
	stopCtx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	for _, f := range s.opts.OnStop {
		f(stopCtx)
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

func (s *Server) shutdown() {
	s.log.Info("shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	if s.health != nil {
		s.health.Shutdown() // every service NOT_SERVING before we stop
	}
	if s.http != nil {
		_ = s.http.Shutdown(ctx)
	}
	if s.metrics != nil {
		_ = s.metrics.Shutdown(ctx)
	}
	if s.grpc != nil {
		done := make(chan struct{})
		go func() {
			s.grpc.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			s.grpc.Stop()
		}
	}
}
