package server

import (
	"net"
	"time"
)

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
	// CleanupInterval paces the retries of removals a down service left
	// unfinished (a deleted logical cloud's parts).
	CleanupInterval time.Duration `env:"DCM_CLEANUP_INTERVAL" flag:"cleanup-interval" default:"5s" usage:"how often unfinished removals are retried"`
	// TokenLifetime is how long the ServiceAccount token in a token user's
	// kubeconfig lasts (core asks rsync for a fresh one per kubeconfig).
	TokenLifetime time.Duration `env:"DCM_TOKEN_LIFETIME" flag:"token-lifetime" default:"24h" usage:"lifetime of the token in a token user's kubeconfig, from 10m to 720h"`
	// DefaultQuota is the quota of a logical cloud that has none of its own.
	DefaultQuota string `env:"DCM_DEFAULT_QUOTA" flag:"default-quota" default:"cpu=8,memory=32Gi,pods=100" usage:"ResourceQuota hard map of a logical cloud without a quota, as resource=quantity,... (empty: none)"`
	// CertLifetime is how long the client certificates of logical clouds'
	// users are valid (their CSRs' spec.expirationSeconds).
	CertLifetime time.Duration `env:"DCM_CERT_LIFETIME" flag:"cert-lifetime" default:"168h" usage:"lifetime of the client certificates clusters issue to logical clouds' users (at least 10m)"`
	// CertRenewPercent is how much of a certificate's life may pass before
	// a kubeconfig read has the cluster issue a fresh one.
	CertRenewPercent int `env:"DCM_CERT_RENEW_PERCENT" flag:"cert-renew-percent" default:"50" usage:"share of a user certificate's life (1 to 99 percent) after which reading a kubeconfig renews it"`

	// Tenant isolation: what only an admin may go beyond.
	MaxQuota           string `env:"DCM_MAX_QUOTA" flag:"max-quota" usage:"largest quantity a non-admin may set per quota resource, as resource=quantity,... (empty: no maximum)"`
	ReservedNamespaces string `env:"DCM_RESERVED_NAMESPACES" flag:"reserved-namespaces" usage:"namespaces no logical cloud may use besides kube-*, default and *-system, comma-separated"`
	PodSecurity        string `env:"DCM_POD_SECURITY" flag:"pod-security" default:"baseline" usage:"Pod Security Admission level enforced in a logical cloud's namespace when it sets none: baseline or restricted"`

	// The resource synchronizer's engine.
	RsyncConcurrency    int           `env:"DCM_RSYNC_CONCURRENCY" flag:"rsync-concurrency" default:"32" usage:"how many clusters rsync works on at once"`
	RsyncRetryBase      time.Duration `env:"DCM_RSYNC_RETRY_BASE" flag:"rsync-retry-base" default:"1s" usage:"first retry delay of a failed apply; it doubles per attempt, with jitter"`
	RsyncRetryMax       time.Duration `env:"DCM_RSYNC_RETRY_MAX" flag:"rsync-retry-max" default:"5m" usage:"cap on the retry delay"`
	RsyncForceConflicts bool          `env:"DCM_RSYNC_FORCE_CONFLICTS" flag:"rsync-force-conflicts" default:"false" usage:"take over fields another field manager owns instead of reporting the conflict"`

	// TLS. With the three files unset, a local CA and certificates are made
	// under DataDir/pki on first start and used from then on.
	TLSCAFile    string `env:"DCM_TLS_CA_FILE" flag:"tls-ca-file" usage:"PEM CA bundle that peers' and clients' certificates chain to (empty: local CA under the data dir)"`
	TLSCertFile  string `env:"DCM_TLS_CERT_FILE" flag:"tls-cert-file" usage:"PEM certificate this program serves and dials with (server and client use)"`
	TLSKeyFile   string `env:"DCM_TLS_KEY_FILE" flag:"tls-key-file" usage:"PEM private key of DCM_TLS_CERT_FILE"`
	InsecureGRPC bool   `env:"DCM_INSECURE_GRPC" flag:"insecure-grpc" default:"false" usage:"serve and dial gRPC in plaintext, without mutual TLS (development only)"`
	InsecureHTTP bool   `env:"DCM_INSECURE_HTTP" flag:"insecure-http" default:"false" usage:"serve plain HTTP instead of HTTPS; refused unless DCM_HTTP_ADDR is loopback (development only)"`
	// AdminTokenFile holds the bootstrap admin bearer token the gateway accepts.
	AdminTokenFile string `env:"DCM_ADMIN_TOKEN_FILE" flag:"admin-token-file" usage:"file holding the bootstrap admin bearer token (empty: the local one under the data dir)"`

	// Key-encryption keys for secrets at rest, one "<id>:<base64 32 bytes>"
	// per line, the first one current. With both unset, DataDir/kek is made
	// on first start.
	KEK     string `env:"DCM_KEK" flag:"kek" secret:"true" usage:"key-encryption keyring for secrets at rest"`
	KEKFile string `env:"DCM_KEK_FILE" flag:"kek-file" usage:"file holding the key-encryption keyring (instead of DCM_KEK)"`

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

// Peer returns addr, or the local gRPC address when addr is empty. A
// wildcard host (0.0.0.0, ::) is dialed on loopback.
func (c *Config) Peer(addr string) string {
	if addr == "" {
		addr = c.GRPCAddr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// IsLoopback reports whether addr ("host:port") listens on loopback only.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
