package server

import "time"

// Config is every DCM program's configuration: defaults, DCM_* environment
// variables, then flags. The all-in-one program and the per-service
// programs share it, so one README table documents it.
type Config struct {
	GRPCAddr      string        `env:"DCM_GRPC_ADDR" flag:"grpc-addr" default:"127.0.0.1:9090" usage:"gRPC listen address (empty: no gRPC listener)"`
	HTTPAddr      string        `env:"DCM_HTTP_ADDR" flag:"http-addr" default:"127.0.0.1:8080" usage:"HTTP listen address: REST (gateway), /metrics and /healthz"`
	DataDir       string        `env:"DCM_DATA_DIR" flag:"data-dir" default:".dcm" usage:"directory for the embedded store and local files"`
	MongoURI      string        `env:"DCM_MONGO_URI" flag:"mongo-uri" secret:"true" usage:"MongoDB URI; empty starts the embedded store"`
	MongoDatabase string        `env:"DCM_MONGO_DATABASE" flag:"mongo-database" default:"dcm" usage:"database name"`
	LogLevel      string        `env:"DCM_LOG_LEVEL" flag:"log-level" default:"info" usage:"debug, info, warn or error"`
	ShutdownGrace time.Duration `env:"DCM_SHUTDOWN_GRACE" flag:"shutdown-grace" default:"10s" usage:"how long in-flight requests may finish on shutdown"`

	// Where each service's gRPC API is reached; empty means DCM_GRPC_ADDR
	// (the all-in-one program serves them all on one endpoint).
	CoreAddr        string `env:"DCM_CORE_ADDR" flag:"core-addr" usage:"core service gRPC address"`
	NamespaceAddr   string `env:"DCM_NAMESPACE_ADDR" flag:"namespace-addr" usage:"namespace service gRPC address"`
	UserAddr        string `env:"DCM_USER_ADDR" flag:"user-addr" usage:"user service gRPC address"`
	QuotaAddr       string `env:"DCM_QUOTA_ADDR" flag:"quota-addr" usage:"quota service gRPC address"`
	ServiceMeshAddr string `env:"DCM_SERVICEMESH_ADDR" flag:"servicemesh-addr" usage:"service-mesh service gRPC address"`
	CADistAddr      string `env:"DCM_CADIST_ADDR" flag:"cadist-addr" usage:"CA-distribution service gRPC address"`
	TrafficAddr     string `env:"DCM_TRAFFIC_ADDR" flag:"traffic-addr" usage:"traffic-controller service gRPC address"`
	RsyncAddr       string `env:"DCM_RSYNC_ADDR" flag:"rsync-addr" usage:"resource-synchronizer service gRPC address"`
}

// Peer returns addr, or the local gRPC address when addr is empty.
func (c *Config) Peer(addr string) string {
	if addr != "" {
		return addr
	}
	return c.GRPCAddr
}
