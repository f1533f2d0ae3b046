// Package app is the body of every DCM program's main: signal context, config,
// logger, store, server, Run. It must not know about any service.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/dcm-project/dcm/platform/client"
	"github.com/dcm-project/dcm/platform/config"
	"github.com/dcm-project/dcm/platform/logging"
	"github.com/dcm-project/dcm/platform/pki"
	"github.com/dcm-project/dcm/platform/server"
	"github.com/dcm-project/dcm/platform/store"
	"github.com/dcm-project/dcm/platform/telemetry"
)

// Env is what a program's build functions get. Config.GRPCAddr is the
// bound address (a ":0" port resolved), so peers can dial it.
type Env struct {
	Config server.Config
	Log    *zap.Logger
	// Store is nil unless the program asked for one.
	Store *store.Store
	// TLS is the program's certificate and CA bundle.
	TLS *pki.TLS
	// AdminToken is the bootstrap admin bearer token ("" if none is configured).
	AdminToken string
	// inProcess carries calls to this program's own services (inprocess.go).
	inProcess *server.InProcess
	// name is the program's name (its certificate's common name).
	name string
}

// Dial connects to another DCM service at addr (empty: this program's own
// gRPC endpoint), over mutual TLS unless DCM_INSECURE_GRPC is set. A
// service this program serves itself is reached in-process (inprocess.go).
func (e *Env) Dial(addr string) (*grpc.ClientConn, error) {
	if c, ok, err := e.dialInProcess(addr); ok {
		return c, err
	}
	if e.Config.InsecureGRPC {
		// No certificate names this program: its calls do (the server's
		// allow-list checks that name).
		return client.DialInsecure(e.Config.Peer(addr), e.name)
	}
	return client.Dial(e.Config.Peer(addr), e.TLS)
}

// Version is the program's module version and VCS revision as the Go
// toolchain recorded them at build time ("(devel)" for a local build).
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v += " " + s.Value
		case "vcs.modified":
			if s.Value == "true" {
				v += " (modified)"
			}
		}
	}
	return v
}

// Build turns an Env into the services a program serves and the options it
// runs with. A program without services has no gRPC listener.
type Build func(ctx context.Context, env *Env) ([]server.Service, server.Options, error)

// Main runs a program named name and exits. "<name> version" prints the
// build's version and exits.
func Main(name string, needStore bool, build Build) {
	if len(os.Args) == 2 && os.Args[1] == "version" {
		fmt.Println(name, Version())
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, name, needStore, build)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, name string, needStore bool, build Build) error {
	p, err := Start(ctx, name, os.Args[1:], needStore, build)
	if err != nil {
		return err
	}
	return p.Wait()
}

// Program is a started program.
type Program struct {
	Env    *Env
	Server *server.Server
	done   chan error
}

// Wait blocks until the program has stopped and returns why.
func (p *Program) Wait() error { return <-p.done }

// LogTo makes Start log to w instead of stderr (tests read the logs).
func LogTo(w io.Writer) StartOption {
	return func(o *startOptions) { o.logTo = w }
}

// StartOption changes how Start runs a program.
type StartOption func(*startOptions)

type startOptions struct{ logTo io.Writer }

// Start loads configuration from args and the environment, builds the
// program and serves in the background until ctx ends.
func Start(ctx context.Context, name string, args []string, needStore bool, build Build, with ...StartOption) (_ *Program, err error) {
	o := startOptions{logTo: os.Stderr}
	for _, f := range with {
		f(&o)
	}
	var cfg server.Config
	if err := config.Load(&cfg, name, args); err != nil {
		return nil, err
	}
	log, err := logging.NewFormatted(name, cfg.LogLevel, cfg.LogFormat, o.logTo)
	if err != nil {
		return nil, err
	}
	log.Info("config", zap.String("config", config.DumpFor(&cfg, name)))
	shutdownTracing, err := telemetry.Setup(ctx, name)
	if err != nil {
		return nil, err
	}
	// Flushes the spans still batched: after the server stopped (below), or now if the start fails.
	stopTracing := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTracing(sctx); err != nil {
			log.Warn("flush traces", zap.Error(err))
		}
	}

	cleanup := []func(){stopTracing}
	defer func() {
		if err != nil {
			for _, f := range cleanup {
				f()
			}
		}
	}()
	if err := server.CheckInsecure(cfg); err != nil {
		return nil, err
	}
	var grpcLn net.Listener
	if cfg.GRPCAddr != "" {
		if grpcLn, err = net.Listen("tcp", cfg.GRPCAddr); err != nil {
			return nil, fmt.Errorf("grpc listen %s: %w", cfg.GRPCAddr, err)
		}
		cleanup = append(cleanup, func() {
			if grpcLn != nil { // a program without services closed it already
				_ = grpcLn.Close()
			}
		})
		cfg.GRPCAddr = grpcLn.Addr().String()
	}
	tlsMat, err := loadTLS(name, &cfg, log)
	if err != nil {
		return nil, err
	}
	adminToken, err := readAdminToken(cfg.AdminTokenFile)
	if err != nil {
		return nil, err
	}
	env := &Env{Config: cfg, Log: log, TLS: tlsMat, AdminToken: adminToken, inProcess: newInProcess(cfg, tlsMat, log), name: name}
	if needStore {
		keyring, err := loadKeyring(&cfg, log)
		if err != nil {
			return nil, err
		}
		uri, err := mongoURI(&cfg)
		if err != nil {
			return nil, err
		}
		st, err := store.Open(store.Config{URI: uri, Database: cfg.MongoDatabase, DataDir: cfg.DataDir, Keyring: keyring}, log.Named("store"))
		if err != nil {
			return nil, err
		}
		env.Store = st
		cleanup = append(cleanup, func() { st.Close(context.Background()) })
	}
	services, opts, err := build(ctx, env)
	if err != nil {
		return nil, err
	}
	if env.Store != nil && len(services) > 0 {
		services = append(services, &keyService{store: env.Store})
	}
	opts.TLS = tlsMat
	if len(services) == 0 && grpcLn != nil {
		_ = grpcLn.Close()
		grpcLn = nil
	}
	opts.GRPCListener = grpcLn
	if grpcLn != nil {
		opts.InProcess = env.inProcess
	} else if env.inProcess != nil {
		env.inProcess.Close()
	}
	if env.Store != nil {
		opts.OnStop = append(opts.OnStop, env.Store.Close)
	}
	srv, err := server.New(cfg, log, opts, services...)
	if err != nil {
		return nil, err
	}
	p := &Program{Env: env, Server: srv, done: make(chan error, 1)}
	go func() {
		err := srv.Run(ctx)
		stopTracing()
		_ = log.Sync()
		p.done <- err
	}()
	return p, nil
}

// StoreBuild is the Build of a program serving one service, named name,
// that needs only the store (its view, Env.StoreFor).
func StoreBuild[S server.Service](name string, newService func(*store.Store) S) Build {
	return func(_ context.Context, env *Env) ([]server.Service, server.Options, error) {
		st, err := env.StoreFor(name)
		if err != nil {
			return nil, server.Options{}, err
		}
		return []server.Service{newService(st)}, server.Options{}, nil
	}
}

// DialPeers connects to other DCM services at addrs (empty: this program's
// own endpoint), in order, and returns the connections and what closes
// them (an OnStop). On error nothing stays open.
func (e *Env) DialPeers(addrs ...string) ([]*grpc.ClientConn, func(context.Context), error) {
	conns := make([]*grpc.ClientConn, 0, len(addrs))
	closeAll := func(context.Context) {
		for _, c := range conns {
			_ = c.Close()
		}
	}
	for _, a := range addrs {
		c, err := e.Dial(a)
		if err != nil {
			closeAll(context.Background())
			return nil, nil, err
		}
		conns = append(conns, c)
	}
	return conns, closeAll, nil
}

// PeerBuild is the Build of a program serving one service, named name,
// that needs the store (its view, Env.StoreFor) and a connection to one
// other service, at the address peer picks from the configuration.
func PeerBuild[S server.Service](name string, peer func(*server.Config) string, newService func(*store.Store, *grpc.ClientConn) S) Build {
	return func(_ context.Context, env *Env) ([]server.Service, server.Options, error) {
		st, err := env.StoreFor(name)
		if err != nil {
			return nil, server.Options{}, err
		}
		conns, closeAll, err := env.DialPeers(peer(&env.Config))
		if err != nil {
			return nil, server.Options{}, err
		}
		return []server.Service{newService(st, conns[0])}, server.Options{OnStop: []func(context.Context){closeAll}}, nil
	}
}
